"""The hf engine on CUDA: it generates, takes a push in place, and then serves what the
policy computes (the same log-probs on its own tokens, greedy = the policy's argmax).
The cpu case is the same check on this machine's CPU."""

import pytest

from tests.helpers.gpu_common import CPU, CUDA, run_job

GAP = 1e-3  # float32 engine and policy: cached decoding vs one full forward (measured ~1e-6 on CPU)


@pytest.mark.parametrize("device", [CPU, CUDA])
def test_hf_engine_generates_and_serves_the_policy_after_a_push(device, tmp_path):
    r = run_job(tmp_path, "engine_push", device)
    if device == "cuda":
        assert r["engine_device"].startswith("cuda") and r["policy_device"].startswith("cuda")
    assert r["push_ok"], r["push_error"]
    assert r["gap_before"] > 1e-2, "the perturbation does not show: the check could not fail"
    assert r["gap_after"] <= GAP, f"after the push the engine differs from the policy by {r['gap_after']}"
    assert r["versions"] == [1] and r["greedy_tokens"] > 0 and r["greedy_is_argmax"]
