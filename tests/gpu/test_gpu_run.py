"""The main job on the embedded tiny model with rollout=hf (no vLLM), end to end through
the CLI: 2 rounds straight against 1 round, a checkpoint, and `--resume auto` to round 2.
The resumed run ends at the same weight version with the same aggregator counters, and
with the same weights within a stated tolerance: GPU kernels are not bit-deterministic
(atomics in backward passes), so instead of bit equality the two runs' weights may differ
by at most 1% of how far training moved them (relative L2 distance) and by at most two
AdamW steps (2 x lr) in any one element. A resume that lost the optimizer state, the RNG
state or the weights is far outside that. The cpu case (UNIFIED_CPU_TWINS=1: ~8 min on a
loaded 2-core machine, where it passed) is the same check on this machine."""

import pytest
import torch

from tests.helpers.e2e import initial_weights, metrics_rows, run
from tests.helpers.gpu_common import CUDA, SLOW_CPU, require

LR = 1e-3  # FAST's algorithm.lr
TIMING = {"last_push_s", "pushes", "last_grad_norm"}  # aggregator entries that are timing or a float


def _state(out_dir) -> dict:
    root = out_dir / "checkpoints"
    return torch.load(root / (root / "latest").read_text().strip() / "state.pt", weights_only=False)


def _final(out_dir) -> dict:
    from tests.helpers.e2e import final_weights

    return final_weights(out_dir)


def _distance(a: dict, b: dict, start: dict) -> tuple[float, float, float]:
    """(||a - b|| / ||a - start||, max |a - b|, ||a - start||) over every tensor."""
    diff = torch.cat([(a[k] - b[k]).flatten().float() for k in sorted(a)])
    moved = torch.cat([(a[k] - start[k]).flatten().float() for k in sorted(a)])
    return float(diff.norm() / moved.norm()), float(diff.abs().max()), float(moved.norm())


@pytest.mark.parametrize("device", [*SLOW_CPU, CUDA])
def test_two_rounds_then_resume_matches_a_straight_run(device, tmp_path):
    require("hydra")
    require("verl.trainer.ppo.core_algos")
    args = ["rollout=hf", f"trainer.device={device}", "trainer.save_every=1"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run(straight, "--rounds", "2", *args)
    run(resumed, "--rounds", "1", *args)
    proc = run(resumed, "--rounds", "2", "--resume", "auto", *args)
    assert "continuing at round 2" in proc.stdout
    a, b = _state(straight), _state(resumed)
    assert a["round"] == b["round"] == 2
    assert a["aggregator"]["version"] == b["aggregator"]["version"] >= 2
    same = lambda s: {k: v for k, v in s["aggregator"].items() if k not in TIMING}  # noqa: E731
    assert same(a) == same(b), "aggregator counters differ"
    relative, largest, moved = _distance(_final(straight), _final(resumed), initial_weights())
    assert moved > 0, "training did not move the weights: the comparison could not fail"
    assert relative <= 1e-2 and largest <= 2 * LR, f"resumed weights differ: {relative:.2e} of the movement, max {largest:.2e}"
    rows = metrics_rows(resumed)
    assert [r["round"] for r in rows] == [1, 2] and all(r["engine/creations"] == 1 for r in rows)
    if device == "cuda":  # GPU memory on the round line: at the update (unified/run/colocate.py)
        assert all("memory/cuda_allocated_gib" in r and r.get("memory/gpu_update_gib", 0) > 0 for r in rows), rows[-1]
    else:
        assert not any("memory/gpu_update_gib" in r for r in rows)
