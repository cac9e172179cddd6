"""The FSDP2 policy on CPU (gloo): log-probs/entropy of padded batches, full state dicts,
save_pretrained, gradient checkpointing, optimizer state, and world size 2 vs 1."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.types import Sample

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
REPO = HELPERS.parents[1]


@pytest.fixture(scope="module")
def device():
    return init_distributed("cpu").device


@pytest.fixture(scope="module")
def hf_model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(default_model_dir()), dtype=torch.float32).eval()


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor; a plain tensor (world size 1, unsharded) as it is."""
    return t.to_local() if hasattr(t, "to_local") else t


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _samples():
    gen = torch.Generator().manual_seed(0)
    shapes = [(3, 7), (9, 2), (5, 5)]  # (prompt, response) lengths: both sides get padded
    out = []
    for p, r in shapes:
        ids = torch.randint(10, 4000, (p + r,), generator=gen).tolist()
        out.append(Sample(tuple(ids[:p]), tuple(ids[p:]), tuple([0.0] * r), 0.0, "g", 0))
    return out


def _reference(hf_model, sample: Sample, temperature: float):
    """Unpadded, unsharded, written out: log_softmax of logits at the positions predicting
    each response token, and the entropy of those distributions."""
    ids = torch.tensor([sample.prompt_token_ids + sample.token_ids])
    p, r = len(sample.prompt_token_ids), len(sample.token_ids)
    with torch.no_grad():
        logits = hf_model(input_ids=ids).logits[0, p - 1 : p + r - 1].float() / temperature
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, torch.tensor(sample.token_ids)[:, None])[:, 0]
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_policy_logprobs_and_entropy_of_padded_batch_match_unpadded_reference(device, hf_model, temperature):
    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    samples = _samples()
    mb = collate(samples, [torch.zeros(len(s.token_ids)) for s in samples], pad_id=0)
    assert mb.input_ids.shape == (3, 9 + 7) and mb.response_mask.shape == (3, 7)
    with torch.no_grad():
        logp, entropy = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, temperature)
    assert logp.shape == entropy.shape == (3, 7)
    for i, s in enumerate(samples):
        ref_logp, ref_entropy = _reference(hf_model, s, temperature)
        r = len(s.token_ids)
        torch.testing.assert_close(logp[i, :r], ref_logp, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(entropy[i, :r], ref_entropy, atol=1e-5, rtol=1e-5)
        assert mb.response_mask[i, :r].all() and not mb.response_mask[i, r:].any()
    # the same row alone (no padding at all) gives the same numbers
    alone = collate(samples[1:2], [torch.zeros(2)], pad_id=0)
    with torch.no_grad():
        lp1, _ = token_logprobs_and_entropy(
            policy.module, alone.input_ids, alone.attention_mask, alone.response_mask, temperature
        )
    torch.testing.assert_close(lp1[0], logp[1, :2], atol=1e-5, rtol=1e-5)


def test_policy_logprobs_have_gradients_and_entropy_can_be_metric_only(device):
    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    samples = _samples()
    mb = collate(samples, [torch.zeros(len(s.token_ids)) for s in samples], pad_id=0)
    logp, entropy = token_logprobs_and_entropy(
        policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, entropy_grad=False
    )
    assert logp.requires_grad and not entropy.requires_grad
    (logp * mb.response_mask).sum().backward()
    grads = [p.grad for p in policy.parameters()]
    assert all(g is not None for g in grads) and any(float(_full(g).abs().sum()) > 0 for g in grads)


def test_policy_full_state_dict_round_trips(device, tmp_path, hf_model):
    from safetensors.torch import load_file

    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    original = load_file(str(default_model_dir() / "model.safetensors"))
    state = policy.full_state_dict()
    assert set(state) == {n for n, _ in hf_model.named_parameters()}  # HF names, tied lm_head once
    assert set(state) <= set(original)
    for name, tensor in state.items():
        assert tensor.device.type == "cpu" and not hasattr(tensor, "full_tensor")
        torch.testing.assert_close(tensor, original[name], atol=0, rtol=0)
    assert [n for n, _ in policy.named_full_weights()] == list(state)

    with torch.no_grad():  # change the policy, then: policy -> disk -> new policy -> same state
        for p in policy.parameters():
            _local(p).mul_(1.01).add_(0.001)
    changed = policy.full_state_dict()
    assert not torch.equal(changed["model.norm.weight"], state["model.norm.weight"])
    policy.write_pretrained(tmp_path / "round", policy.full_state_dict())
    again = build_policy(str(tmp_path / "round"), device=device, dtype="float32").full_state_dict()
    assert set(again) == set(changed)
    for name in changed:
        torch.testing.assert_close(again[name], changed[name], atol=0, rtol=0)


def test_policy_written_pretrained_loads_in_transformers(device, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    with torch.no_grad():
        for p in policy.parameters():
            _local(p).add_(0.01)
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_dir()))
    policy.write_pretrained(tmp_path / "hf", policy.full_state_dict(), tokenizer=tokenizer)
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"), dtype=torch.float32).eval()
    assert AutoTokenizer.from_pretrained(str(tmp_path / "hf"))("def f(x):")["input_ids"] == tokenizer("def f(x):")["input_ids"]
    ids = torch.tensor([tokenizer("def add(a, b):\n    return a + b")["input_ids"]])
    with torch.no_grad():
        ours = policy.module(input_ids=ids).logits
        theirs = loaded(input_ids=ids).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_policy_gradient_checkpointing_gives_the_same_gradients(device):
    samples = _samples()
    mb = collate(samples, [torch.zeros(len(s.token_ids)) for s in samples], pad_id=0)
    grads = []
    for ckpt in (False, True):
        policy = build_policy(str(default_model_dir()), device=device, dtype="float32", gradient_checkpointing=ckpt)
        assert policy.module.is_gradient_checkpointing == ckpt
        logp, entropy = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask)
        ((logp + 0.1 * entropy) * mb.response_mask).sum().backward()
        grads.append({n: _full(p.grad).clone() for n, p in policy.module.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4)


def test_policy_optimizer_state_round_trips(device):
    samples = _samples()
    mb = collate(samples, [torch.zeros(len(s.token_ids)) for s in samples], pad_id=0)
    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    logp, _ = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, with_entropy=False)
    (logp * mb.response_mask).sum().backward()
    opt.step()
    state = policy.optimizer_state(opt)
    assert state["state"] and "model.norm.weight" in state["state"]  # full, keyed by HF name
    fresh = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    policy.load_optimizer_state(fresh, state)
    again = policy.optimizer_state(fresh)
    for name, entry in state["state"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(again["state"][name][key], entry[key], atol=0, rtol=0)


def test_policy_world_size_1_float32_runs_unsharded_bf16_and_world_2_shard(device):
    """FSDP2 at world size 1 in float32 would only copy parameters in and out of its
    buffers: the model runs plain. (World size 2 is sharded: the test below.)"""
    from torch.distributed.tensor import DTensor

    policy = build_policy(str(default_model_dir()), device=device, dtype="float32")
    assert not policy.sharded and not any(isinstance(p, DTensor) for p in policy.parameters())
    frozen = build_policy(str(default_model_dir()), device=device, dtype="float32", trainable=False)
    assert not frozen.sharded and not any(p.requires_grad for p in frozen.parameters())
    # bf16 on a CPU at world size 1: still unwrapped, float32 master weights, compute under autocast
    mixed = build_policy(str(default_model_dir()), device=device, dtype="bfloat16")
    assert not mixed.sharded and mixed.autocast == torch.bfloat16
    assert all(not isinstance(p, DTensor) and p.dtype == torch.float32 for p in mixed.parameters())


def test_policy_world_size_2_matches_world_size_1(tmp_path, device):
    """torchrun --nproc_per_node=2 (gloo): both ranks end with identical full weights, equal
    to the same steps at world size 1 (run here, in this process's world of one; there the
    model runs unsharded, so this also checks FSDP2 against the plain model)."""
    from tests.helpers import dist_policy_step

    steps = 3
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(HELPERS / "dist_policy_step.py"),
        str(tmp_path),
        str(steps),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]

    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    single = dist_policy_step.train(steps)
    assert single["world"] == 1 and [r["world"] for r in ranks] == [2, 2]
    assert single["version"] == ranks[0]["version"] == ranks[1]["version"] == steps
    # the true global grad norm on both world sizes (the clip at 0.5 is active)
    assert ranks[0]["grad_norms"] == ranks[1]["grad_norms"]
    torch.testing.assert_close(torch.tensor(ranks[0]["grad_norms"]), torch.tensor(single["grad_norms"]), rtol=1e-4, atol=0)
    assert min(single["grad_norms"]) > 0.5

    initial = build_policy(str(default_model_dir()), device=device, dtype="float32").full_state_dict()
    assert set(ranks[0]["state"]) == set(ranks[1]["state"]) == set(single["state"])
    moved = max(float((single["state"][n] - initial[n]).abs().max()) for n in initial)
    assert moved > 1e-3  # the steps really changed the weights
    for name in single["state"]:
        assert torch.equal(ranks[0]["state"][name], ranks[1]["state"][name]), name
        torch.testing.assert_close(ranks[0]["state"][name], single["state"][name], atol=2e-5, rtol=1e-4)
