"""unified/eval/experiments/sweep.py's comparison of each configuration with `default` itself, on hand-made
results: the counts and the token ratio against hand-computed values, and an unfinished
configuration gets no comparison."""

import pytest

from unified.eval.experiments import sweep

IDS = [f"Mbpp/{i}" for i in range(8)]


def _config(solved: set[int], tokens: float, complete: bool = True) -> dict:
    return {
        "complete": complete,
        "generation_tokens": tokens,
        "per_problem_after": {0: {i: float(n in solved) for n, i in enumerate(IDS)}},
    }


def test_each_configuration_is_compared_with_default_at_its_price():
    results = {"default": _config({0, 1}, 1000.0), "mix": _config({0, 2, 3}, 1500.0), "cut": _config({0}, 10.0, False)}
    sweep.against_default(results)
    assert results["mix"]["vs_default"] == {
        "difference": pytest.approx(1 / 8),
        "only_this": 2,
        "only_default": 1,
        "mcnemar_p": 1.0,
        "generation_tokens_ratio": 1.5,
    }
    assert "vs_default" not in results["default"] and "vs_default" not in results["cut"]
    assert all("per_problem_after" not in r for r in results.values())  # the JSON keeps the comparison, not the outcomes
