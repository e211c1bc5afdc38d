"""Each cause is one unit and each rule is registered with its docs and a fixture (ruff's way).

- every cause name has one unit (label, colour, advice, fix safety) and every unit's advice
  kinds are its own (no two units word one kind);
- the generated docs are current (docs/causes.md's table of causes, from the units;
  docs/diagnosis.md's row per rule, from its docstring), and name every cause and rule;
- every registered rule decides at least one compile of the corpus (tests/corpus/runs and the
  sample runs), and the finding it made is pinned in tests/corpus/verdicts.json; the rules
  that no corpus run exercises yet are listed below with why, and the list can only shrink
  (a listed rule that fires fails the test until it is taken off).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tests.corpus.verdicts import EXPECTED, corpus
from xprof.analysis import analyze
from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.registry import RULES, UNITS
from xprof.runfile import load_run

ROOT = Path(__file__).resolve().parents[1]

NO_FIXTURE_YET = {
    "cpu_fallback": "an op without an XLA lowering that compiles a new graph after warm-up (tests/scenarios only)",
    "dynamo_sync": "torch.compile's own sync compiling after warm-up (the dynamo runs compile at its tracing reads)",
    "eval_graph_size": "a file recorded without backward-pass counts (older recorders): the corpus has none",
    "joined_pass": "an eval pass with no barrier of its own, run inside the next training step",
    "library_call": "a library call's own compile around a read, outside a known mechanism",
    "read_after_data_dependent_op": "a read after a value-dependent op, in the same step, that compiled",
    "unknown": "a compile mid-step outside any read: none in the corpus",
}
"""Registered rules no corpus run exercises yet -> the loop that would."""


def _rule_names() -> set[str]:
    return {rule.name for rules in RULES.values() for rule in rules}


@lru_cache(maxsize=1)
def _fired() -> dict[str, list[tuple[str, str, str]]]:
    """Rule -> (corpus file, finding id, cause) of each compile it decided."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for path in corpus():
        compiles = analyze(load_run(path)).compiles
        if not len(compiles):
            continue
        for rule, finding, cause in set(zip(compiles["rule"], compiles["finding"], compiles["cause"])):
            out.setdefault(str(rule), []).append((path.name, str(finding), str(cause)))
    return out


def test_every_cause_has_one_unit() -> None:
    assert set(UNITS) == set(CauseName) - {CauseName.ABSTAIN}
    kinds: dict[str, CauseName] = {}
    for name, unit in UNITS.items():
        assert unit.name == name and unit.label and unit.colour.startswith("#")
        assert unit.means and unit.fix and unit.fix_safety, name
        for kind in unit.advice:
            assert kind not in kinds, f"{kind} is worded by {kinds[kind]} and {name}"
            kinds[kind] = name


def test_causes_doc_is_current_and_names_every_rule() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "causes_doc.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rules = (ROOT / "docs" / "diagnosis.md").read_text(encoding="utf-8")
    for name in _rule_names():
        assert f"| `{name}` |" in rules, name
    causes = (ROOT / "docs" / "causes.md").read_text(encoding="utf-8")
    for name in UNITS:
        assert f"| `{name}` |" in causes, name


@pytest.mark.parametrize("rule", sorted(_rule_names()))
def test_rule_fires_on_the_corpus_and_its_finding_is_pinned(rule: str) -> None:
    fired = _fired().get(rule, [])
    if rule in NO_FIXTURE_YET:
        assert not fired, f"{rule} now fires on {fired[0][0]}: take it off NO_FIXTURE_YET"
        return
    assert fired, f"no corpus run exercises {rule}: add a loop to tests/corpus/loops and record it"
    pinned = json.loads(EXPECTED.read_text(encoding="utf-8"))
    for run, finding, cause in fired:
        said = pinned[run]["findings"]
        ids = {f.split(" | ")[0] for f in said}
        causes = {f.split(" | ")[1].split("/")[0] for f in said}
        if finding in ids or cause in causes or (cause == CauseName.GRAPH_CHANGE and finding == "eval"):
            return
    raise AssertionError(f"{rule}'s findings are pinned nowhere: {fired}")


def test_no_fixture_list_names_registered_rules() -> None:
    assert set(NO_FIXTURE_YET) <= _rule_names()


def test_the_step_rules_read_the_same_on_one_barrier_and_on_a_column() -> None:
    """diagnosis/phases.py is applied to plain bools live and to numpy columns in the
    analysis: every combination of a barrier's evidence gets the same answer both ways."""
    import itertools

    import numpy as np

    from xprof.diagnosis.phases import is_eval, leads_to_next_update

    combos = list(itertools.product((False, True), repeat=7))
    cols = [np.array(c, dtype=bool) for c in zip(*combos)]
    for opt_seen in (False, True):
        column = is_eval(*cols[:6], opt_seen)
        for k, c in enumerate(combos):
            assert bool(column[k]) == bool(is_eval(*c[:6], opt_seen)), (c, opt_seen)
    ahead = leads_to_next_update(cols[0], cols[1])
    assert [bool(v) for v in ahead] == [bool(leads_to_next_update(a, b)) for a, b, *_ in combos]
    # an eval barrier: a graph, grad off, no backward, no optimizer step, not dynamo's, in a run with updates
    assert is_eval(True, True, False, False, False, False, True)
    assert not is_eval(True, True, False, False, False, False, False)
    assert not is_eval(True, True, False, True, False, False, True)


def test_growth_is_one_rule_for_the_run_and_for_the_live_side() -> None:
    from xprof.diagnosis.rules.graphs import GrowthRuns, grown
    from xprof.diagnosis.terms import GROWING_GRAPHS

    seq = [(10 + k, 50 + 10 * k) for k in range(GROWING_GRAPHS)]
    found = grown({7: seq}, floor=40)
    assert sorted(found) == seq and all(v == [n for _, n in seq] for v in found.values())
    assert grown({7: seq}, floor=50 + 10 * GROWING_GRAPHS) == {}  # none larger than the training graph
    assert grown({7: [*seq[:-1], (99, 45)]}, floor=40) == {}  # a smaller graph ends the run short
    live: GrowthRuns[str] = GrowthRuns()
    sizes = None
    for step, nodes in seq:
        assert live.larger(7, nodes)
        sizes = live.add(7, nodes, f"held {step}")
    assert sizes == [n for _, n in seq]
    short: GrowthRuns[str] = GrowthRuns()
    short.add(3, 60, "first")
    assert short.cached(3, 60) == "first" and not short.larger(3, 70)  # rerun from the cache: over for good


def test_a_value_op_no_hook_saw_is_a_value_dependent_shape() -> None:
    from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
    from xprof.diagnosis.rules.value_ops import counted

    walk = Walk()
    walk.seen_sigs.add(4)
    c = CompileFacts("barrier", 1.0, 5.0, 90)

    def step(**kw: object) -> StepFacts:
        base: dict[str, object] = {"i": 9, "ordinal": 5, "phase": "train", "sig_id": 4, "sites": frozenset(),
                                   "dd_sites": [], "dynamo": False, "fallback": frozenset({"aten::nonzero"})}
        return StepFacts(**{**base, **kw})  # type: ignore[arg-type]

    cause = counted(c, step(), walk)
    assert cause is not None and cause.cause == CauseName.DATA_DEPENDENT and cause.key.ops == ["aten::nonzero"]
    assert counted(c, step(dd_sites=[3]), walk) is None  # a hooked op: the rules with its line decide
    assert counted(c, step(sig_id=5), walk) is None  # new inputs: the shape rules decide
    assert counted(c, step(fallback=frozenset({"aten::histc"})), walk) is None  # not value-dependent


def test_uncompiled_fallbacks_leave_out_what_a_finding_has() -> None:
    from xprof.diagnosis.rules.fallback import uncompiled

    ran = [(0, {"aten::histc"}), (3, {"aten::histc", "aten::nonzero"}), (4, {"aten::median"})]
    cause = uncompiled(ran, {"aten::median"}, value_shapes=True)
    assert cause is not None and cause.key.ops == ["aten::histc"]
    cause = uncompiled(ran, set(), value_shapes=False)
    assert cause is not None and set(cause.key.ops) == {"aten::histc", "aten::nonzero", "aten::median"}
    assert uncompiled([(1, {"aten::histc"})], set(), value_shapes=False) is None  # warm-up only
