"""Phase-5 rewards: value comparison, any-input abduction, induction on held-out pairs,
format penalty, and one executor batch for many rollouts."""

import pytest

from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from unified.pipeline.rewards import parse_answer, penalize_format_only_without_signal, score, score_batch
from unified.types import Task, TestCase

PAIR_PROGRAM = "def pair_sum(a, b):\n    return (a + b, a * b)\n"


@pytest.fixture(scope="module")
def executor():
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as ex:
        yield ex


def _task(kind, cases, shown=(), program=PAIR_PROGRAM, entry="pair_sum", atol=0.0):
    return Task(
        task_id=f"t:{kind}",
        kind=kind,
        problem_id="t",
        program_id="t#p0",
        prompt="?",
        gold="",
        entry_point=entry,
        program=program,
        cases=tuple(cases),
        shown=tuple(shown),
        atol=atol,
    )


DEDUCTION = _task("deduction", [TestCase((2, 3), (5, 6))])
ABDUCTION = _task("abduction", [TestCase((2, 3), (5, 6))])


def test_deduction_compares_values_not_strings(executor):
    assert score(DEDUCTION, "<answer>(5,6)</answer>", executor) == (1.0, None)
    assert score(DEDUCTION, "reasoning...\n<answer> (5, 6) </answer>", executor) == (1.0, None)
    assert score(DEDUCTION, "<answer>[5, 6]</answer>", executor) == (0.0, None)  # a list is not the tuple
    assert score(DEDUCTION, "<answer>(5, 7)</answer>", executor) == (0.0, None)
    assert score(DEDUCTION, "<answer>'(5, 6)'</answer>", executor) == (0.0, None)  # a string is not the value


def test_deduction_uses_the_problem_tolerance(executor):
    task = _task("deduction", [TestCase((1,), 0.1 + 0.2)], atol=1e-6)
    assert score(task, "<answer>0.3</answer>", executor)[0] == 1.0
    assert score(task, "<answer>0.31</answer>", executor)[0] == 0.0


def test_unreadable_answers_get_the_format_penalty(executor):
    assert score(DEDUCTION, "the answer is (5, 6)", executor, format_penalty=-0.5) == (-0.5, "no_answer")
    assert score(DEDUCTION, "<answer>five and six</answer>", executor, format_penalty=-0.5) == (-0.5, "not_a_literal")
    assert score(DEDUCTION, "<answer>five</answer>", executor, format_penalty=0.0) == (0.0, "not_a_literal")


def test_abduction_accepts_any_input_that_works(executor):
    assert score(ABDUCTION, "<answer>pair_sum(2, 3)</answer>", executor) == (1.0, None)
    assert score(ABDUCTION, "<answer>pair_sum(3, 2)</answer>", executor) == (1.0, None)  # a different input, same output
    assert score(ABDUCTION, "<answer>(3, 2)</answer>", executor) == (1.0, None)  # bare argument tuple
    assert score(ABDUCTION, "<answer>pair_sum(1, 4)</answer>", executor) == (0.0, None)
    assert score(ABDUCTION, "<answer>pair_sum('a', 3)</answer>", executor) == (0.0, None)  # raises in the sandbox
    assert score(ABDUCTION, "<answer>pair_sum(2)</answer>", executor, format_penalty=-1.0) == (-1.0, "wrong_arity")


def test_abduction_never_evaluates_the_answer(executor, tmp_path):
    marker = tmp_path / "pwned"
    answer = f"<answer>pair_sum(__import__('os').system('touch {marker}'), 1)</answer>"
    assert score(ABDUCTION, answer, executor, format_penalty=-0.5) == (-0.5, "not_a_literal")
    assert not marker.exists()


INDUCTION = _task(
    "induction",
    cases=[TestCase((1, 1), (2, 1)), TestCase((2, 5), (7, 10)), TestCase((0, 3), (3, 0))],
    shown=[TestCase((2, 3), (5, 6))],
)
RIGHT = "<answer>\n```python\ndef pair_sum(x, y):\n    return (y + x, y * x)\n```\n</answer>"
TWO_OF_THREE = "<answer>\ndef pair_sum(x, y):\n    return (x + y, x * y if x else -1)\n</answer>"


def test_induction_runs_the_candidate_on_held_out_pairs(executor):
    assert score(INDUCTION, RIGHT, executor) == (1.0, None)
    assert score(INDUCTION, TWO_OF_THREE, executor, partial_credit=False) == (0.0, None)
    assert score(INDUCTION, TWO_OF_THREE, executor, partial_credit=True) == (pytest.approx(2 / 3), None)
    loops = "<answer>\ndef pair_sum(x, y):\n    while True:\n        pass\n</answer>"
    assert score(INDUCTION, loops, executor, partial_credit=True) == (0.0, None)
    assert score(INDUCTION, "<answer>def other(x, y): return 1</answer>", executor, format_penalty=-0.5) == (
        -0.5,
        "no_entry_point",
    )
    assert score(INDUCTION, "<answer>def pair_sum(x, y) return</answer>", executor, format_penalty=-0.5) == (-0.5, "syntax")


def test_induction_reward_mode_is_checked():
    from unified.pipeline.config import PipelineConfig

    with pytest.raises(ValueError, match="induction_reward"):
        PipelineConfig(induction_reward="most")
    assert PipelineConfig(induction_reward="fraction").partial_credit and not PipelineConfig().partial_credit


def test_batch_scores_use_one_executor_batch(executor):
    batches = []

    def run_batch(calls):
        batches.append(len(calls))
        return executor.run_batch(calls)

    items = [
        (DEDUCTION, "<answer>(5, 6)</answer>"),
        (ABDUCTION, "<answer>pair_sum(3, 2)</answer>"),
        (ABDUCTION, "nothing"),
        (INDUCTION, RIGHT),
        (INDUCTION, TWO_OF_THREE),
    ]
    got = score_batch(items, run_batch, format_penalty=-0.5, partial_credit=True)
    assert got == [(1.0, None), (1.0, None), (-0.5, "no_answer"), (1.0, None), (pytest.approx(2 / 3), None)]
    assert batches == [1 + 3 + 3]  # one batch: abduction 1 call, induction 3 held-out pairs each


def test_parse_answer_kinds():
    assert parse_answer(DEDUCTION, "<answer>{'a': [1, (2,)]}</answer>") == ({"a": [1, (2,)]}, None)
    assert parse_answer(ABDUCTION, "<answer>pair_sum(1, 2)</answer>") == ((1, 2), None)
    code, reason = parse_answer(INDUCTION, RIGHT)
    assert reason is None and code.startswith("def pair_sum(x, y):")


SOLVE = _task("solve", [TestCase((2, 3), (5, 6))])
OK, NO, BAD = (1.0, None), (0.0, None), (-0.5, "syntax")


@pytest.mark.parametrize(
    "groups, expected",
    [
        # no group has a right answer: the penalty stays, the format is what trains
        ([[NO, BAD], [NO, NO]], [[NO, BAD], [NO, NO]]),
        # some group has one: unreadable scores like wrong everywhere, only correctness trains
        ([[OK, BAD], [NO, BAD]], [[OK, (0.0, "syntax")], [NO, (0.0, "syntax")]]),
        # lone answers (n=1) count across the batch
        ([[OK], [BAD]], [[OK], [(0.0, "syntax")]]),
        ([[NO], [BAD]], [[NO], [BAD]]),
    ],
)
def test_the_format_penalty_only_where_correctness_gives_no_signal(groups, expected):
    assert penalize_format_only_without_signal([SOLVE] * len(groups), groups) == expected


def test_without_the_penalty_unreadable_scores_like_the_worst_readable_answer():
    graded = [[(1.0, None), (-0.3, None), (-0.5, "no_code")]]  # solve_reward=graded: an error scores -0.6
    assert penalize_format_only_without_signal([SOLVE], graded, "graded") == [[(1.0, None), (-0.3, None), (-0.6, "no_code")]]
    deduction = [[(1.0, None), (-0.5, "no_answer")]]  # the self-play kinds: wrong scores 0
    assert penalize_format_only_without_signal([DEDUCTION], deduction) == [[(1.0, None), (0.0, "no_answer")]]
