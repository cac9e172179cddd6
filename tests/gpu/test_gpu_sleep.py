"""vLLM's sleep mode on one GPU (needs the CUDA `vllm` package besides the GPU; skipped
without either): asleep, the engine gives its KV cache and weights back and refuses to
generate; awake, it answers as before; in the colocated update (unified/run/colocate.py)
it sleeps for each optimizer step, wakes for each push, and samples the pushed version."""

import pytest

from tests.helpers.gpu_common import require, run_job

pytestmark = pytest.mark.gpu


def test_vllm_sleeps_during_the_update_and_wakes_for_the_push(tmp_path):
    require("vllm")
    require("verl.trainer.ppo.core_algos")
    r = run_job(tmp_path, "sleep_vllm")
    assert r["frees_memory"], "rollout=vllm on CUDA is built with sleep mode by default"
    # gpu_memory_utilization=0.3 reserves most of that for the KV cache: sleeping frees it
    assert r["asleep_gib"] < r["awake_gib"] - 1.0, (r["awake_gib"], r["asleep_gib"])
    assert r["refused_asleep"] and r["same_after_wake"]
    assert r["steps"] == 2 and r["sleeps"] == 2 and r["engine_version"] == 2 and not r["asleep_at_end"]
    assert r["versions_sampled"] == [2]
    assert r["metrics"]["engine/sleeps"] == 2 and r["metrics"]["memory/gpu_update_gib"] > 0
