"""A tiny transformers.Trainer run: BERT from a config, 6 optimizer steps, logging every 2,
batches padded to the longest example (lengths vary), optim="adamw_torch".

Imported by the tests (``train(callback=...)`` runs in the test process) and run as a script
under ``xprof run`` (no callback): both must tell the same story.
"""

from __future__ import annotations

import copyreg
import sys
from typing import Any

import torch
import transformers

copyreg._slotnames(torch.Tensor)  # type: ignore[attr-defined]  # see tests/test_huggingface.py

LENGTHS = [5, 9, 7, 12, 6, 10, 8, 11]


def _collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    longest = max(len(r["input_ids"]) for r in rows)
    ids = [r["input_ids"] + [0] * (longest - len(r["input_ids"])) for r in rows]
    mask = [[1] * len(r["input_ids"]) + [0] * (longest - len(r["input_ids"])) for r in rows]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
            "labels": torch.tensor([r["labels"] for r in rows])}


def train(out_dir: str, callbacks: list[Any] | None = None, grad_accum: int = 1, evaluate: bool = False) -> Any:
    """``evaluate``: an evaluation pass of 2 batches every 3 steps (``eval_strategy="steps"``)."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=24,
                                     max_position_embeddings=16, num_labels=2)
    model = transformers.BertForSequenceClassification(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(1, 100, (n,), generator=g).tolist(), "labels": i % 2}
            for i, n in enumerate(LENGTHS * 8)]
    args = transformers.TrainingArguments(
        output_dir=out_dir, max_steps=6, per_device_train_batch_size=4, logging_steps=2,
        gradient_accumulation_steps=grad_accum, optim="adamw_torch", report_to=[],
        save_strategy="no", disable_tqdm=True, use_cpu=False,
        eval_strategy="steps" if evaluate else "no", eval_steps=3, per_device_eval_batch_size=4)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, data_collator=_collate,
                                   eval_dataset=data[:8] if evaluate else None, callbacks=callbacks or [])
    trainer.train()
    return trainer


class CrashAtStep2(transformers.TrainerCallback):  # type: ignore[misc]
    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step == 2:
            raise ValueError("loss is nan at step 2")


if __name__ == "__main__":
    # OUT_DIR [--eval] [--crash RUN]: --crash records RUN with XprofCallback and raises
    # from inside trainer.train() at step 2, left uncaught, as a user's script would.
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    callbacks = None
    if "--crash" in sys.argv:
        from xprof.integrations.huggingface import XprofCallback

        callbacks = [XprofCallback(sys.argv[sys.argv.index("--crash") + 1]), CrashAtStep2()]
        argv = argv[:1]
    train(argv[0] if argv else "hf-out", callbacks, evaluate="--eval" in sys.argv)
