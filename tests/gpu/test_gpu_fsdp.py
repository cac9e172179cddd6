"""FSDP2 over NCCL (tests/helpers/dist_policy_step.py under torchrun, one GPU per rank): the same
fixed global batch, 3 optimizer steps with the grad-norm clip active.

- world size 1, bfloat16: FSDP2's mixed precision (sharded even on one GPU, NCCL), which
  must make the update float32 makes (unsharded): measured on CPU with the same FSDP2
  policy over gloo, cosine 0.997 between the two weight updates and grad norms within 4e-4
  relative; asserted here with margin: cosine > 0.95, grad norms within 2e-2;
- world size 2 (where two GPUs exist), float32: equal to world size 1 within
  float32 reduction-order noise (the gloo version: tests/trainer/test_policy.py)."""

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers.gpu_common import gpus, require, run_job

pytestmark = pytest.mark.gpu
STEPS = "3"


def _initial() -> dict:
    from unified.models.tiny_model import default_model_dir

    return load_file(str(default_model_dir() / "model.safetensors"))


def _delta(state: dict, initial: dict) -> torch.Tensor:
    return torch.cat([(state[n].float() - initial[n].float()).flatten() for n in sorted(initial)])


def _train(tmp_path, name: str, ranks: int, dtype: str) -> dict:
    out = tmp_path / name
    out.mkdir()
    return run_job(out, "fsdp", STEPS, "cuda", dtype, ranks=ranks)


def test_fsdp2_on_nccl_world_size_1_bf16_makes_the_float32_update(tmp_path):
    require("verl.trainer.ppo.core_algos")
    bf16, fp32 = _train(tmp_path, "bf16", 1, "bfloat16"), _train(tmp_path, "fp32", 1, "float32")
    assert bf16["backend"] == fp32["backend"] == "nccl" and bf16["world"] == 1
    assert bf16["sharded"] and not fp32["sharded"]
    assert bf16["version"] == fp32["version"] == int(STEPS)
    torch.testing.assert_close(torch.tensor(bf16["grad_norms"]), torch.tensor(fp32["grad_norms"]), rtol=2e-2, atol=0)
    initial = _initial()
    a, b = _delta(fp32["state"], initial), _delta(bf16["state"], initial)
    assert float(a.abs().max()) > 1e-3, "the steps did not move the weights"
    cosine = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
    assert cosine > 0.95, f"bf16 FSDP2 update differs from the float32 one: cosine {cosine:.4f}"


@pytest.mark.skipif(gpus() < 2, reason="needs two CUDA GPUs")
def test_fsdp2_on_nccl_two_ranks_equals_one(tmp_path):
    require("verl.trainer.ppo.core_algos")
    two, one = _train(tmp_path, "two", 2, "float32"), _train(tmp_path, "one", 1, "float32")
    assert two["world"] == 2 and two["sharded"] and two["backend"] == "nccl"
    assert two["version"] == one["version"] == int(STEPS)
    torch.testing.assert_close(torch.tensor(two["grad_norms"]), torch.tensor(one["grad_norms"]), rtol=1e-4, atol=0)
    assert min(one["grad_norms"]) > 0.5  # the clip at 0.5 was active
    for name, tensor in one["state"].items():
        torch.testing.assert_close(two["state"][name], tensor, atol=2e-5, rtol=1e-4)
