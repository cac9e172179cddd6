"""The aggregator: what turns gradients into weight versions, in process.

    filter_stale(samples)      drop what was generated more than `max_staleness` versions ago
    step(contributions)        average the contributions' gradients, clip the global grad
                               norm, non-finite guard, optimizer step, zero_grad,
                               version += 1, optionally keep the last K snapshots on disk
    state_dict()               version and counters, for checkpoints

It knows neither the engine nor the micro-batches: the update loop
(`update.train_on_samples`) runs the forwards and backwards of one optimizer step's
samples, calls `step()` once, and pushes the new version into the engine, in plain sight.

Global batch = micro_batch_size x world_size x accum_steps x update_steps samples
(`AlgorithmConfig.samples_per_step` per rank). Ranks are averaged by FSDP2's gradient
reduce-scatter in every backward. A contribution is `accum_steps` micro-batches whose loss
is normalised over the contribution (see `losses.ppo_loss`), so its gradient is the
gradient of its mean loss; `step()` averages the step's contributions (gradients summed by
the backwards, divided by their count here).

A non-finite global grad norm skips the step: counted, gradients zeroed, weights and
optimizer state untouched, version unchanged.

Checkpoints: `state_dict()` is the aggregator's own small state. The optimizer state is
separate (`optimizer_state_dict()`): it is large and gathered collectively, and the caller
writes it next to the weights. No gradient is ever pending between steps, so none is lost.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch.distributed.tensor import DTensor

from unified.trainer.config import AlgorithmConfig
from unified.trainer.distributed import world_size
from unified.trainer.policy import Policy

log = logging.getLogger("unified")

# the state a checkpoint keeps (older checkpoints also hold `global_step`, always equal to
# `version`, and pending-contribution counts, always 0 at a save: both are ignored on load)
COUNTERS = ("version", "total_contributions", "dropped_stale", "skipped_nonfinite", "last_grad_norm")


@dataclass(frozen=True)
class StepResult:
    """What one `step()` did. `stepped=False`: skipped for a non-finite gradient."""

    stepped: bool
    version: int  # the weight version after the step (unchanged when skipped)
    grad_norm: float


class Aggregator:
    def __init__(
        self,
        policy: Policy,
        optimizer: torch.optim.Optimizer,
        algorithm: AlgorithmConfig = AlgorithmConfig(),
        *,
        snapshot_dir: str | Path | None = None,
    ):
        """`algorithm`: the frozen config it reads `grad_clip`, `max_staleness`,
        `keep_last_versions` and the batch sizes (for `stats`) from."""
        if algorithm.keep_last_versions > 0 and snapshot_dir is None:
            raise ValueError("keep_last_versions > 0 needs a snapshot_dir")
        self.policy, self.optimizer, self.algorithm = policy, optimizer, algorithm
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir is not None else None
        self.version = self.total_contributions = self.dropped_stale = self.skipped_nonfinite = 0
        self.last_grad_norm = 0.0

    # ------------------------------------------------------------ staleness
    def staleness(self, version: int) -> int:
        return self.version - version

    def filter_stale(self, items: Sequence, version_of: Callable = lambda s: s.version) -> list:
        """Items (samples, or anything `version_of` reads a version from) generated at most
        `max_staleness` versions ago; the rest are counted in `dropped_stale`."""
        kept = [s for s in items if self.staleness(version_of(s)) <= self.algorithm.max_staleness]
        self.dropped_stale += len(items) - len(kept)
        return kept

    # ------------------------------------------------------------ the step
    def step(self, contributions: int = 1) -> StepResult:
        """The gradients the backwards left (`contributions` of them, summed) averaged,
        clipped, guarded, applied; then zeroed, and version += 1."""
        if contributions < 1:
            raise ValueError(f"step() needs at least one contribution, got {contributions}")
        params = [p for p in self.policy.parameters() if p.grad is not None]
        self.total_contributions += contributions
        with torch.no_grad():
            for p in params:
                p.grad.div_(contributions)
        max_norm = self.algorithm.grad_clip if self.algorithm.grad_clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm) if params else torch.tensor(0.0)
        # DTensor grads give the true global norm (all ranks agree, so they skip together)
        self.last_grad_norm = norm = float((norm.full_tensor() if isinstance(norm, DTensor) else norm).item())
        if not math.isfinite(norm):
            self.skipped_nonfinite += 1
            self.optimizer.zero_grad(set_to_none=True)
            log.warning("non-finite gradient norm (%s): step skipped, weights unchanged", norm)
            return StepResult(False, self.version, norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        if self.algorithm.keep_last_versions > 0:
            self._snapshot()
        return StepResult(True, self.version, norm)

    def _snapshot(self) -> None:
        state = self.policy.full_state_dict()  # collective: every rank gathers
        if dist.is_initialized() and dist.get_rank() != 0:
            return
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        contiguous = {k: v.contiguous() for k, v in state.items()}
        save_file(contiguous, self.snapshot_dir / f"version_{self.version:06d}.safetensors", metadata={"format": "pt"})
        for old in sorted(self.snapshot_dir.glob("version_*.safetensors"))[: -self.algorithm.keep_last_versions]:
            old.unlink()

    # ------------------------------------------------------------ reporting and state
    def stats(self) -> dict:
        """The counters, and the global batch they were made with."""
        return {**self.state_dict(), "global_batch_size": self.algorithm.samples_per_step * world_size()}

    def state_dict(self) -> dict:
        return {key: getattr(self, key) for key in COUNTERS}

    def load_state_dict(self, state: dict) -> None:
        for key in COUNTERS:
            setattr(self, key, state[key])

    def optimizer_state_dict(self) -> dict:
        """Full optimizer state (collective; complete on rank 0)."""
        return self.policy.optimizer_state(self.optimizer)

    def load_optimizer_state_dict(self, state: dict) -> None:
        self.policy.load_optimizer_state(self.optimizer, state)


def build_aggregator(algorithm: AlgorithmConfig, policy: Policy, *, snapshot_dir: str | Path | None = None) -> Aggregator:
    """AdamW over the trainable parameters + the Aggregator, as the algorithm group says."""
    a = algorithm
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=a.lr, weight_decay=a.weight_decay, betas=a.betas)
    return Aggregator(policy, optimizer, algorithm, snapshot_dir=snapshot_dir)
