"""What ``--explain`` costs: per step with the mode on, and per new graph.

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/explain.py [--layers 12] [--rounds 8] [--json OUT]

An MLP of ``--layers`` hidden layers (SGD with momentum, so the optimizer has state) trained
with ``torch_xla.sync()`` a step:

1. per step: ``watch(explain=False)`` and ``watch(explain=True)`` in alternating blocks of
   50 steps, the graph cached in both (steady state): median step time of each arm and their
   ratio;
2. the parts of a step under the mode, alone: collecting the tensors to hash, the graph hash
   (``_get_graph_hash``), and tracing the step's ops with torch_xla's IR frames on against off
   (``_set_ir_debug``), per traced node;
3. per new graph: the HLO proto (``_get_xla_tensors_hlo_proto``, training thread), reading it
   (``xprof.hlo.read_module``) and comparing it with the graph before
   (``xprof.hlo.diff``, both on the writer thread).

Prints figures, asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit_json, json_arg, table


def _arg(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main() -> None:
    import torch
    import torch_xla

    import xprof
    from xprof.hlo import diff, keys, read_module
    from xprof.recorder.explain import Explain
    from xprof.recorder.frames import FrameClassifier, FrameKind

    layers, rounds, block = _arg("--layers", 12), _arg("--rounds", 8), 50
    dev = torch_xla.device()
    X: Any = torch_xla._XLAC
    torch.manual_seed(0)
    mods: list[torch.nn.Module] = [torch.nn.Linear(32, 64), torch.nn.ReLU()]
    for _ in range(layers):
        mods += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods, torch.nn.Linear(64, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(16, 32).to(dev), torch.randn(16, 1).to(dev)

    def trace(scale: float = 0.5) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(model(x), y) * scale
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    def steps(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            trace()
            torch_xla.sync()
            out.append(time.perf_counter() - t0)
        return out

    steps(5)
    # 1. per step, steady state, the two arms alternated
    times: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for arm in ("off", "on") if r % 2 == 0 else ("on", "off"):
                with xprof.watch(f"{tmp}/{arm}{r}.json", live=False, explain=arm == "on") as w:
                    w.exit_summary = False
                    times[arm] += steps(block)[5:]
    off, on = statistics.median(times["off"]), statistics.median(times["on"])

    # 2. the parts of a step: tensors, hash, tracing with frames
    class _Rec:
        def __init__(self) -> None:
            self.optimizers = [opt]

        def error(self, where: str, exc: BaseException) -> None:
            raise exc

    ex = Explain(_Rec(), X, FrameClassifier())
    loss = trace()
    ex.saw_backward(loss)
    ts = ex.tensors()
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        ex.tensors()
    collect_us = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for _ in range(n):
        X._get_graph_hash(ts)
    hash_ms = (time.perf_counter() - t0) / n * 1e3
    proto = X._get_xla_tensors_hlo_proto(ts)
    torch_xla.sync()
    nodes = len(read_module(proto).ops)
    traced: dict[bool, list[float]] = {False: [], True: []}
    before = bool(X._get_ir_debug())
    for k in range(2 * rounds):
        flag = k % 2 == 1
        X._set_ir_debug(flag)
        t0 = time.perf_counter()
        trace()
        traced[flag].append(time.perf_counter() - t0)
        torch_xla.sync()
    # 3. per new graph (frames on, as under the mode)
    X._set_ir_debug(True)
    loss = trace(0.5)
    ts = [loss, *model.parameters()]
    t0 = time.perf_counter()
    old_proto = X._get_xla_tensors_hlo_proto(ts)
    proto_ms = (time.perf_counter() - t0) * 1e3
    torch_xla.sync()
    loss = trace(1.0)
    new_proto = X._get_xla_tensors_hlo_proto([loss, *model.parameters()])
    torch_xla.sync()
    X._set_ir_debug(before)
    t0 = time.perf_counter()
    old, new = read_module(old_proto), read_module(new_proto)
    read_ms = (time.perf_counter() - t0) / 2 * 1e3
    frames = FrameClassifier()
    t0 = time.perf_counter()
    d = diff(old, new, lambda p: frames.kind(p) == FrameKind.USER, keys(old), keys(new))
    diff_ms = (time.perf_counter() - t0) * 1e3
    frame_us = (statistics.median(traced[True]) - statistics.median(traced[False])) / max(nodes, 1) * 1e6

    rows = [
        ["step, explain off (median)", f"{off * 1e3:.3f} ms", ""],
        ["step, explain on (median)", f"{on * 1e3:.3f} ms", f"x{on / off:.3f}"],
        ["  tensors collected a step", f"{collect_us:.1f} us", f"{len(ts)} tensors"],
        ["  graph hash a step", f"{hash_ms:.3f} ms", ""],
        ["  IR frames while tracing", f"{frame_us:.2f} us a node", f"{nodes} nodes"],
        ["new graph: HLO proto", f"{proto_ms:.2f} ms", f"{len(old_proto) // 1024} KiB"],
        ["new graph: read (writer thread)", f"{read_ms:.2f} ms", ""],
        ["new graph: diff (writer thread)", f"{diff_ms:.2f} ms", d.lines[0].what if d.lines else "-"],
    ]
    print(f"--explain on an MLP of {layers} hidden layers (SGD with momentum), {rounds} rounds of {block} steps")
    print(table(rows, ["what", "figure", ""]))
    emit_json(json_arg(sys.argv), {"step_off_ms": off * 1e3, "step_on_ms": on * 1e3, "ratio": on / off,
                                   "hash_ms": hash_ms, "collect_us": collect_us, "frame_us_per_node": frame_us,
                                   "nodes": nodes, "proto_ms": proto_ms, "read_ms": read_ms, "diff_ms": diff_ms})


if __name__ == "__main__":
    main()
