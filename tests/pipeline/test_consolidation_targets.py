"""Consolidation's targets (`pipeline/consolidation.py`): one answer per problem, chosen by
agreement on the round's proposed inputs (ties by mean log-prob), kept until another agrees
strictly more; a greedy answer that passes its visible example is its problem's target; the
previous target is re-run on this round's inputs in the real sandbox; the state round-trips."""

from types import SimpleNamespace

import pytest

from unified.pipeline.consolidation import FOUND, GREEDY, Greedy, Target, agreement, choose, from_state, round_targets, to_state
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from unified.types import Completion, IOTriple, Problem, Program, TestCase


def _c(logp: float, tokens=(1, 2)) -> Completion:
    return Completion("x", (9,), tuple(tokens), (logp,) * len(tokens), "stop", 0)


def _t(code: str, logp: float = -1.0, source: str = FOUND) -> Target:
    return Target("P", _c(logp), code, 0, source)


INPUTS = ["(1,)", "(2,)"]


def test_agreement_counts_samples_with_the_same_outputs_on_every_input():
    sig = {"(1,)": "2", "(2,)": "4"}
    others = [({"(1,)": "2", "(2,)": "4"}, 3), ({"(1,)": "2", "(2,)": "5"}, 1), ({"(1,)": "2"}, 2)]
    assert agreement(sig, others, INPUTS) == 3  # a missing output is a value of its own
    assert agreement({}, [({}, 2)], INPUTS) == 2


def test_the_best_agreeing_answer_wins_and_ties_go_to_the_higher_mean_logprob():
    double, other, lone = {"(1,)": "2", "(2,)": "4"}, {"(1,)": "2", "(2,)": "4"}, {"(1,)": "3", "(2,)": "4"}
    pool = [(_t("a", -0.1), lone, 1), (_t("b", -2.0), double, 1), (_t("c", -1.0), other, 1)]
    chosen = choose(None, pool, INPUTS)
    assert chosen.code == "c" and chosen.agreement == 1  # b and c agree; c is likelier
    assert choose(None, [(_t("b", -2.0), double, 3), (_t("a", -0.1), lone, 1)], INPUTS).code == "b"  # 3 samples wrote b
    assert choose(None, [], INPUTS) is None


def test_the_previous_target_stays_unless_another_agrees_strictly_more():
    sig, odd = {"(1,)": "2", "(2,)": "4"}, {"(1,)": "9", "(2,)": "9"}
    previous = (_t("old", -5.0), sig, 1)
    assert choose(previous, [(_t("new", -0.1), sig, 1)], INPUTS).code == "old"  # a tie keeps it, log-prob or not
    assert choose(previous, [(_t("new", -0.1), sig, 1), (_t("n2", -0.2), sig, 1)], INPUTS).code == "old"  # 2 vs 2
    two = choose((_t("old", -5.0), odd, 1), [(_t("new", -0.1), sig, 1), (_t("n2", -0.2), sig, 1)], INPUTS)
    assert two.code == "new" and two.agreement == 1  # old agrees with nobody


DOUBLE = "def f(x):\n    return 2 * x\n"
PLUS = "def f(x):\n    return x + x\n"
SQUARE = "def f(x):\n    return x * x\n"  # passes the visible f(2) == 4, disagrees elsewhere


def _round(passing_codes: list[str]):
    problem = Problem("P", "test", "double x", "f", (TestCase((2,), 4),))
    programs = tuple(Program("P", f"P#p{i}", code, "f") for i, code in enumerate(passing_codes))
    outputs = {DOUBLE: lambda x: 2 * x, PLUS: lambda x: 2 * x, SQUARE: lambda x: x * x}
    triples = tuple(IOTriple("P", p.program_id, (x,), outputs[p.code](x), "proposed") for p in programs for x in (3, 5))
    return SimpleNamespace(
        problems=(problem,),
        program_candidates=programs,
        triples=triples,
        program_completions={"P": tuple(_c(-1.0 - i) for i in range(len(programs)))},
        visible_passing=frozenset(p.program_id for p in programs),
    )


@pytest.fixture(scope="module")
def executor():
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as ex:
        yield ex


def test_a_round_keeps_its_target_re_run_in_the_sandbox_and_a_greedy_pass_takes_over(executor):
    first = round_targets({}, _round([SQUARE, DOUBLE, PLUS]), {}, executor.run_batch)
    assert first["P"].code == DOUBLE and first["P"].agreement == 1 and first["P"].source == FOUND  # PLUS agrees
    # next round only SQUARE passes: the previous target, re-run on this round's inputs, agrees with nobody either;
    # a tie keeps it
    again = round_targets(first, _round([SQUARE]), {}, executor.run_batch)
    assert again["P"].code == DOUBLE
    greedy = {"P": Greedy(_c(-0.5, (7, 8, 9)), Program("P", "P#p0", PLUS, "f"), True)}
    taken = round_targets(first, _round([SQUARE]), greedy, executor.run_batch)
    assert taken["P"].code == PLUS and taken["P"].source == GREEDY and taken["P"].completion.token_ids == (7, 8, 9)
    failing = {"P": Greedy(_c(-0.5), Program("P", "P#p0", SQUARE, "f"), False)}
    assert round_targets(first, _round([]), failing, executor.run_batch)["P"].code == DOUBLE  # nothing new: kept
    assert round_targets({}, _round([]), failing, executor.run_batch) == {}


def test_the_targets_round_trip_through_the_checkpoint_state():
    import json

    targets = {"P": _t(DOUBLE, -0.3), "Q": Target("Q", _c(-1.0, (4, 5, 6)), PLUS, 2, GREEDY)}
    assert from_state(json.loads(json.dumps(to_state(targets)))) == targets
