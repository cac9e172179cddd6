"""The policy update on CUDA, float32 and bfloat16 (FSDP2's mixed precision over NCCL at
world size 1), learns the toy task of tests/e2e/test_learnability.py through the hf engine:
reward = the share of completion tokens in a fixed 10% of the vocabulary, starting near
0.1 (the untrained model), past 0.9 within 40 optimizer steps, each pushed into the
engine. The GRPO loss itself is ~0 by construction (advantages are centred per group),
so the falling loss is read as its objective: the rising reward. The cpu case runs only
with UNIFIED_CPU_TWINS=1 (~1-2 min on 2 cores; tests/e2e/test_learnability.py is the CPU
version with vLLM)."""

import pytest

from tests.helpers.gpu_common import SLOW_CPU, require, run_job

CASES = [
    *[pytest.param("cpu", "float32", marks=p.marks, id="cpu-float32") for p in SLOW_CPU],
    pytest.param("cuda", "float32", marks=pytest.mark.gpu, id="cuda-float32"),
    pytest.param("cuda", "bfloat16", marks=pytest.mark.gpu, id="cuda-bfloat16"),
]


@pytest.mark.parametrize("device, dtype", CASES)
def test_update_learns_the_toy_task(device, dtype, tmp_path):
    require("verl.trainer.ppo.core_algos")  # verl's core_algos
    r = run_job(tmp_path, "learn", device, dtype)
    history = [round(h, 3) for h in r["history"]]
    assert history[0] < 0.3, f"the untrained model already scores {history[0]}"
    assert r["versions"] <= 40 and history[-1] > 0.9, f"reward only {history} after {r['versions']} steps"
    assert r["end"] > 0.9, f"a fresh evaluation scores {r['end']:.3f}"
    assert r["skipped"] == 0 and r["engine_version"] == r["versions"]  # every step finite and pushed
    # bf16 on CUDA goes through FSDP2 (mixed precision) even on one GPU; float32 runs unsharded
    assert r["sharded"] == (dtype == "bfloat16")
