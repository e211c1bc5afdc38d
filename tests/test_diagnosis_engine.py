"""The diagnosis engine (xprof/diagnosis/): one registry of rules, run by the analysis and by
the live notices; its reference in docs/diagnosis.md made from it."""

from __future__ import annotations

from pathlib import Path

from xprof.diagnosis import reference
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.registry import RULES
from xprof.diagnosis.walk import advance, decide, judge

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_hold_the_reference_made_from_the_registry() -> None:
    doc = (ROOT / "docs" / "diagnosis.md").read_text(encoding="utf-8")
    assert reference.markdown() in doc, "run: python -m xprof.diagnosis.reference, and paste it into docs/diagnosis.md"


def test_every_rule_is_documented_and_each_list_ends_in_one_that_always_answers() -> None:
    step = StepFacts(i=5, ordinal=5, phase="train", sig_id=None, sites=frozenset(), dd_sites=[], dynamo=False)
    for at, rules in RULES.items():
        names = [r.name for r in rules]
        assert len(names) == len(set(names)), at
        assert all(len(r.doc) > 40 for r in rules), [r.name for r in rules if len(r.doc) <= 40]
        assert all(r.maybe is None or r.whole_run for r in rules)
        # the last rule answers whatever it is given
        assert rules[-1].decide(CompileFacts(at, 1.0, 5.0, None), step, Walk()) is not None


def _sig(n: int) -> tuple[tuple[str, tuple[int, ...], str, str], ...]:
    return (("x", (4, n), "int64", "batch"),)


def test_the_walk_on_exact_facts_warm_up_then_a_new_shape() -> None:
    walk = Walk()
    for sid, n in enumerate((8, 8, 12)):
        walk.add_sig(sid, _sig(n))
    causes = []
    for i, sid in enumerate((0, 0, 0, 1)):
        step = StepFacts(i=i, ordinal=i, phase="train", sig_id=sid, sites=frozenset(), dd_sites=[], dynamo=False,
                         nodes=40, user_step=i)
        compiles = [CompileFacts("barrier", i + 0.9, 100.0, 40)] if i in (0, 1, 3) else []
        causes += [(i, c.cause, c.rule) for c in judge(compiles, step, walk)]
        advance(step, walk)
    assert causes == [(0, "warmup", "warmup"), (1, "warmup", "warmup"), (3, "input_shape", "input_shape")]


def test_a_whole_run_rule_abstains_live_where_it_may_apply() -> None:
    walk = Walk(train_nodes=40)
    walk.add_sig(0, _sig(8))
    walk.seen_sigs.add(0)
    step = StepFacts(i=9, ordinal=9, phase="train", sig_id=0, sites=frozenset(), dd_sites=[], dynamo=False,
                     nodes=60, user_step=9)
    larger = CompileFacts("barrier", 9.9, 100.0, 60)
    assert decide(larger, step, walk).cause == "abstain"  # it may be a graph that grows: only more steps tell
    assert decide(larger, step, walk, past="graph_grows").cause == "graph_change"
    same = CompileFacts("barrier", 9.9, 100.0, 40)
    assert decide(same, step, walk).cause == "graph_change"


def test_the_rules_explain_switches_on_for_are_registered_barrier_rules() -> None:
    from xprof.diagnosis.registry import AT_BARRIER, UNEXPLAINED

    assert UNEXPLAINED <= {rule.name for rule in AT_BARRIER}
