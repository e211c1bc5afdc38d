"""XprofCallback on a real transformers Trainer, on torch_xla (CPU), with a tiny model from a config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.xla, pytest.mark.slow]

try:
    # transformers deep-copies tensors, and copyreg then caches ``__slotnames__`` on
    # torch.Tensor; conftest's leak guard would take that for a patch left behind.
    import copyreg

    import torch

    copyreg._slotnames(torch.Tensor)  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    pass


def _tiny_trainer(tmp_path: Path, callback: Any, steps: int = 6) -> Any:
    transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                       "(pip install 'xprof-lazy[hf]')")
    pytest.importorskip("accelerate", reason="accelerate is not installed (pip install 'xprof-lazy[hf]')")
    import torch

    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=37,
                                     max_position_embeddings=16, num_labels=2)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 100, (8,), generator=g),
             "attention_mask": torch.ones(8, dtype=torch.long),
             "labels": torch.tensor(i % 2)} for i in range(32)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=steps, per_device_train_batch_size=4,
        logging_steps=2, optim="adamw_torch", report_to=[], save_strategy="no",
        disable_tqdm=True, dataloader_drop_last=True, use_cpu=False,
    )
    return transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])


def test_callback_records_a_trainer_run(device: Any, tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'xprof-lazy[hf]')")
    from xprof.analysis import analyze
    from xprof.integrations.huggingface import XprofCallback
    from xprof.runfile import load_run

    cb = XprofCallback(tmp_path / "hf.json")
    trainer = _tiny_trainer(tmp_path, cb)
    try:
        trainer.train()
    finally:
        cb.close()
    run = load_run(cb.path or "")
    assert run.complete and run.end is not None and run.end.status == "ok"
    a = analyze(run)
    assert a.totals.steps >= 6
    # The Trainer's own logging reads: sites whose via is a transformers function.
    vias = [s.via or "" for s in run.sites.values()]
    print(sorted(set(vias)), [(s.access, s.file, s.line, s.via) for s in run.sites.values()])
    assert any(v.startswith("transformers.") for v in vias)
    marks = [d for d in run.debug if d.kind == "hf_log"]
    assert [d.fields["global_step"] for d in marks][:3] == [2, 4, 6]
    assert cb.logging_steps[:3] == [2, 4, 6]


def test_close_after_a_failed_train_marks_the_error(device: Any, tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'xprof-lazy[hf]')")
    from transformers import TrainerCallback

    from xprof.integrations.huggingface import XprofCallback
    from xprof.runfile import load_run

    class Boom(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step == 2:
                raise RuntimeError("boom")

    cb = XprofCallback(tmp_path / "fail.json")
    trainer = _tiny_trainer(tmp_path, cb, steps=4)
    trainer.add_callback(Boom())
    with pytest.raises(RuntimeError, match="boom"):
        try:
            trainer.train()
        except BaseException as exc:
            cb.close(exc)
            raise
    run = load_run(cb.path or "")
    assert run.end is not None and run.end.status == "error"
    assert "boom" in (run.end.exception or "")


def test_run_left_open_is_closed_at_exit_as_an_error(device: Any, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                       "(pip install 'xprof-lazy[hf]')")
    from xprof.integrations.huggingface import XprofCallback
    from xprof.runfile import load_run

    cb = XprofCallback(tmp_path / "open.json", name="open")
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "o"), report_to=[])
    cb.on_train_begin(args, None, None)
    cb._close_at_exit()  # what atexit runs when train() raised and nobody called close()
    cb.close()  # idempotent
    run = load_run(cb.path or "")
    assert run.name == "open" and run.end is not None and run.end.status == "error"
    assert "did not reach on_train_end" in (run.end.exception or "")


def test_log_marks_keep_record_order_under_concurrent_steps(device: Any, tmp_path: Path) -> None:
    """``on_log`` from another thread while the training thread runs steps (as with a logging
    thread): each mark lands between the step before it and the step it belongs to."""
    import json
    import threading
    from types import SimpleNamespace

    import torch
    import torch_xla

    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'xprof-lazy[hf]')")
    from xprof.integrations.huggingface import XprofCallback

    cb = XprofCallback(tmp_path / "marks.json", name="marks", inputs=False, syncs=False)
    args = SimpleNamespace(run_name=None, output_dir=str(tmp_path))
    cb.on_train_begin(args, None, None)
    stop = threading.Event()
    logged = 0

    def logger() -> None:
        nonlocal logged
        while not stop.is_set():
            cb.on_log(args, SimpleNamespace(global_step=logged), None, logs={"loss": 1.0})
            logged += 1

    t = threading.Thread(target=logger)
    x = torch.ones(4, device=device)
    t.start()
    try:
        for _ in range(40):
            x = x * 1.5 + 1
            torch_xla.sync()
    finally:
        stop.set()
        t.join()
        cb.close()
    lines = [json.loads(line) for line in Path(cb.path or "").read_text().splitlines()[1:]]
    order = [(r["type"], r["i"]) for r in lines if r["type"] == "step"
             or (r["type"] == "debug" and r["kind"] == "hf_log")]
    marks = [i for kind, i in order if kind == "debug"]
    assert len(marks) == logged and logged > 0
    assert [i for kind, i in order if kind == "step"] == list(range(40))
    done = 0  # steps written so far: a mark of step k comes after step k-1 and before step k
    for kind, i in order:
        if kind == "step":
            done = i + 1
        else:
            assert i == done, (i, done)


def test_an_uncaught_error_in_train_is_the_runs_exception(tmp_path: Path) -> None:
    """A script whose ``trainer.train()`` raises and nobody catches: the run names that error."""
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'xprof-lazy[hf]')")
    import os
    import subprocess
    import sys

    from xprof.runfile import load_run

    script = Path(__file__).parent / "scripts" / "hf_padded_trainer.py"
    run_path = tmp_path / "crash.json"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), "--crash", str(run_path)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PJRT_DEVICE": "CPU", "XPROF_LIVE": "0"})
    assert proc.returncode == 1 and "ValueError: loss is nan at step 2" in proc.stderr, proc.stderr[-2000:]
    run = load_run(run_path)
    assert run.complete and run.end is not None and run.end.status == "error"
    assert "ValueError" in (run.end.exception or "") and "loss is nan at step 2" in (run.end.exception or "")
    assert "TrainingDidNotFinish" not in (run.end.exception or "")
