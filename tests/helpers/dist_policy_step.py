"""A few optimizer steps of the FSDP2 policy; run by tests/trainer/test_policy.py under
`torchrun --nproc_per_node=N` (gloo on CPU). Every rank writes its full weights and the
grad norms it saw to OUT/rank{R}.pt.

The global batch is fixed (same on every world size): GLOBAL rows, rank r takes rows
r, r+N, ... Every row has the same number of response tokens, so the token-mean loss of a
rank averaged over ranks (FSDP2's gradient reduction) equals the token-mean loss of the
whole batch at world size 1: the weights must come out the same.

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/helpers/dist_policy_step.py OUT [STEPS [DEVICE [DTYPE]]]

DEVICE cuda: NCCL, one GPU per rank (tests/gpu/test_gpu_fsdp.py); DTYPE bfloat16: FSDP2's
mixed precision, sharded even at world size 1.
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

GLOBAL, PROMPT, RESPONSE = 4, 6, 8


def train(steps: int, device: str = "cpu", dtype: str = "float32") -> dict:
    """`steps` optimizer steps in the current process group; returns what rank{R}.pt holds."""
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.aggregator import Aggregator
    from unified.trainer.distributed import init_distributed
    from unified.trainer.config import AlgorithmConfig
    from unified.trainer.losses import ppo_loss
    from unified.trainer.policy import build_policy
    from unified.trainer.logprobs import token_logprobs_and_entropy

    info = init_distributed(device)
    policy = build_policy(str(default_model_dir()), device=info.device, dtype=dtype)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(10, 4000, (GLOBAL, PROMPT + RESPONSE), generator=gen).to(info.device)
    advantages = torch.randn(GLOBAL, 1, generator=gen).expand(GLOBAL, RESPONSE).contiguous().to(info.device)
    mine = list(range(info.rank, GLOBAL, info.world_size))
    # one row per micro-batch, all of a rank's rows in one contribution: one step per pass
    # (the clip at 0.5 is active: the true global norm must be used on every world size)
    aggregator = Aggregator(policy, optimizer, AlgorithmConfig(grad_clip=0.5))
    tokens_per_contribution = RESPONSE * len(mine)

    grad_norms = []
    for _ in range(steps):
        for row in mine:
            input_ids = ids[row : row + 1]
            mask = torch.ones(1, RESPONSE, device=info.device)
            logp, _ = token_logprobs_and_entropy(policy.module, input_ids, torch.ones_like(input_ids), mask, with_entropy=False)
            loss, _ = ppo_loss(
                logp,
                logp.detach(),
                advantages[row : row + 1],
                mask,
                AlgorithmConfig(),
                batch_num_tokens=tokens_per_contribution,
                global_batch_size=len(mine),
            )
            loss.backward()
        result = aggregator.step(contributions=1)
        assert result.stepped
        grad_norms.append(result.grad_norm)
    state = policy.full_state_dict()
    return {
        "state": state,
        "grad_norms": grad_norms,
        "version": aggregator.version,
        "world": info.world_size,
        "sharded": policy.sharded,
        "backend": str(dist.get_backend()),
    }


def main() -> None:
    out = Path(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    result = train(steps, *sys.argv[3:5])
    torch.save(result, out / f"rank{dist.get_rank()}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
