"""`algorithm.use_kl_loss=true` works: the run builds the frozen reference policy (it used to
pass every check and then raise in the first update), and the KL term changes the update."""

import json
import subprocess
import sys
from pathlib import Path

import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.config import AlgorithmConfig
from unified.trainer.aggregator import build_aggregator
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.update import train_on_samples
from unified.types import Sample

REPO = Path(__file__).resolve().parents[2]


def _samples():
    gen = torch.Generator().manual_seed(0)
    return [
        Sample((5, 6, 7), tuple(torch.randint(10, 4000, (4,), generator=gen).tolist()), (-8.3,) * 4, float(i % 2), "g", 0)
        for i in range(8)
    ]


def _trained(use_kl: bool):
    device = init_distributed("cpu").device
    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    with torch.no_grad():  # the policy has moved away from the reference, as after earlier steps
        for p in policy.trainable_parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    ref = build_policy(str(default_model_dir()), device=device, dtype="float32", trainable=False)
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=8, accum_steps=1, update_steps=1, use_kl_loss=use_kl, kl_loss_coef=1.0)
    stats = train_on_samples(
        _samples(), build_aggregator(cfg, policy), cfg, engine=None, pad_token_id=0, ref_policy=ref if use_kl else None
    )
    return stats, {n: t.clone() for n, t in policy.full_state_dict().items()}


def test_the_kl_term_is_measured_and_changes_the_step():
    with_kl, weights_kl = _trained(True)
    without, weights = _trained(False)
    assert with_kl.losses["kl"] > 0 and with_kl.steps == without.steps == 1
    assert any(not torch.equal(weights_kl[n], weights[n]) for n in weights)


def test_a_run_with_the_kl_loss_completes(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        str(REPO / "train_unified.py"),
        "model=tiny",
        "experiment=smoke",
        "trainer.rounds=2",
        "algorithm.use_kl_loss=true",
        f"--output-dir={out}",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("losses/kl" in r for r in rows)
