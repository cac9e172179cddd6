"""Compute per role, the unbiased pass@k and the ScaleRL fit: pure pieces, no model."""

import json
import math
from types import SimpleNamespace

import pytest

from unified.eval.pass_at_k import pass_at_k
from unified.eval.scaling_fit import fit_metrics, fit_scalerl, scalerl_curve, write_fit_summary
from unified.run.telemetry import ComputeLedger, MeteredEngine


def test_ledger_measures_process_cpu_time_and_tokens_per_role_and_round_trips():
    ledger = ComputeLedger()
    with ledger.measure("update", tokens=7):
        sum(i * i for i in range(300_000))  # burns CPU: process time grows
    assert ledger.seconds["update"] > 0 and ledger.tokens["update"] == 7
    assert ledger.seconds["generation"] == 0 and ledger.tokens["evaluation"] == 0
    m = ledger.metrics()
    assert m["compute/total_s"] == pytest.approx(sum(ledger.seconds.values()))
    again = ComputeLedger()
    again.load_state_dict(json.loads(json.dumps(ledger.state_dict())))
    assert again.metrics() == m
    with pytest.raises(ValueError):
        with ledger.measure("inference"):
            pass


def test_metered_engine_attributes_greedy_to_evaluation_and_sampling_to_generation():
    completion = SimpleNamespace(token_ids=(1, 2, 3))

    class Engine:
        version = 4

        def generate(self, prompts, sampling, shapes=None, ends=None):
            return [[completion] * sampling.n for _ in prompts]

    ledger = ComputeLedger()
    engine = MeteredEngine(Engine(), ledger)
    engine.generate(["a", "b"], SimpleNamespace(temperature=0.0, n=1))
    engine.generate(["a"], SimpleNamespace(temperature=0.8, n=4))
    assert ledger.tokens == {"generation": 12, "update": 0, "evaluation": 6}
    assert engine.version == 4  # everything else is the engine's


def test_pass_at_k_is_the_unbiased_estimator_not_best_of_first_k():
    # 5 samples, 1 correct: pass@1 = 1/5, pass@2 = 1 - C(4,2)/C(5,2) = 0.4, pass@5 = 1
    est = pass_at_k({"a": 1, "b": 0, "c": 5}, 5, [1, 2, 5, 9])
    assert set(est) == {1, 2, 5}  # k > n is not estimable
    assert est[1] == pytest.approx([0.2, 0.0, 1.0])
    assert est[2] == pytest.approx([0.4, 0.0, 1.0])
    assert est[5] == pytest.approx([1.0, 0.0, 1.0])


def test_scalerl_fit_recovers_known_parameters():
    c = [5, 10, 20, 40, 80, 160, 320]
    r = [float(scalerl_curve(x, 0.12, 0.42, 50.0, 1.3)) for x in c]
    fit = fit_scalerl(c, r)
    assert fit["fitted"]
    assert fit["r0"] == pytest.approx(0.12, abs=1e-3) and fit["a"] == pytest.approx(0.42, abs=1e-3)
    assert fit["c_mid"] == pytest.approx(50.0, rel=1e-2) and fit["b"] == pytest.approx(1.3, rel=1e-2)
    assert set(fit_metrics("mbpp", fit)) == {f"eval/mbpp/fit_{k}" for k in ("r0", "a", "c_mid", "b", "loss")}
    assert fit["covariance_estimated"] is True


def test_a_fit_through_as_many_points_as_parameters_says_so_without_a_warning():
    """4 evaluations (the confirm run's 3 rounds + the end) fit the 4 parameters exactly: scipy
    cannot estimate their covariance and warned on stderr; the result says it instead."""
    import warnings

    c = [1.0, 100.0, 200.0, 300.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        fit = fit_scalerl(c, [0.05, 0.06, 0.09, 0.1])
    assert fit["fitted"] and fit["covariance_estimated"] is False


@pytest.mark.parametrize("points, reason", [(([1, 2, 3], [0.1, 0.2, 0.3]), "at least 4"), (([1, 2, 3, 4], [0.2] * 4), "flat")])
def test_scalerl_fit_says_why_not(points, reason, tmp_path):
    summary = write_fit_summary(tmp_path / "eval_fit_summary.json", "mbpp", *points, {"compute/total_s": 4.0})
    assert summary["status"] == "not fitted" and reason in summary["reason"]
    on_disk = json.loads((tmp_path / "eval_fit_summary.json").read_text())
    assert on_disk["compute_totals"] == {"compute/total_s": 4.0} and not fit_metrics("mbpp", on_disk)
    assert len(on_disk["points"]) == len(points[0]) and all(math.isfinite(p["pass_at_1"]) for p in on_disk["points"])
