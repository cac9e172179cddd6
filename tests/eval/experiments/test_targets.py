"""The target judge's choice rule (`targets.agreement_pick`) and its one-line errors."""

import pytest

from unified.errors import UserError
from unified.eval.experiments import targets


def test_the_answer_most_samples_agree_with_is_picked():
    candidates = {"t": ("def f(x): return x", 1), "a": ("def f(x): return 2*x", 3), "b": ("def f(x): return x+x", 2)}
    signatures = {"t": ("1",), "a": ("2",), "b": ("2",)}
    assert targets.agreement_pick(candidates, signatures, keep="t") in {"a", "b"}


def test_a_tie_keeps_the_target():
    candidates = {"t": ("p", 2), "a": ("q", 2)}
    assert targets.agreement_pick(candidates, {"t": ("1",), "a": ("2",)}, keep="t") == "t"
    assert targets.agreement_pick(candidates, {"t": ("1",), "a": ("2",)}, keep="a") == "a"


def test_a_run_without_checkpointed_rounds_is_one_error(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(UserError, match="no round with a checkpoint"):
        targets.judge_run(tmp_path)
