"""The aggregator: the old HTTP orchestrator's semantics, in process, with no server.

    micro-batch backward --(accum_steps)--> one gradient contribution, tagged with the
    oldest weight version among its samples --(update_steps)--> average the contributions,
    clip the global grad norm, NaN/inf guard, AdamW step, version += 1, optionally keep
    the last K snapshots on disk.

It does not know the engine: `backward` says when a step is due, the caller calls `step()`
and pushes the new version (`update.train_on_samples` does both, in plain sight).

Global batch = micro_batch x world_size x accum_steps x update_steps samples. Ranks are
averaged by FSDP2's gradient reduce-scatter in every backward; contributions are averaged
here (gradients summed, then divided by their count at the step). A micro-batch loss is
expected to be normalised over its contribution (see `losses.ppo_loss`), so a
contribution's gradient is the gradient of its mean loss.

Staleness (current version - sample version) is checked per sample before its forward
(`filter_stale`); gradients already summed cannot be taken apart again, so there is no
per-contribution drop at step time.

A non-finite global grad norm skips the step: counted, gradients zeroed, weights and
optimizer state untouched, version unchanged.

Checkpoints: `state_dict()` is the aggregator's own small state (version and counters).
The optimizer state is separate (`optimizer_state_dict()`): it is large and gathered
collectively, and the caller writes it next to the weights. Gradients of pending
contributions are never saved: checkpoint after a flush (`train_on_samples` flushes).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from unified.schema import AlgorithmConfig
from unified.trainer.distributed import world_size
from unified.trainer.policy import Policy
from unified.types import Sample

log = logging.getLogger("unified")

COUNTERS = (
    "version", "global_step", "total_contributions", "total_micro_batches", "dropped_stale",
    "skipped_nonfinite", "last_grad_norm",
)


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
        *,
        accum_steps: int = 1,
        update_steps: int = 1,
        grad_clip: float = 1.0,
        max_staleness: int = 1,
        micro_batch_size: int = 1,
        keep_last_versions: int = 0,
        snapshot_dir: str | Path | None = None,
    ):
        if accum_steps < 1 or update_steps < 1:
            raise ValueError("accum_steps and update_steps must be >= 1")
        if keep_last_versions > 0 and snapshot_dir is None:
            raise ValueError("keep_last_versions > 0 needs a snapshot_dir")
        self.policy, self.optimizer = policy, optimizer
        self.accum_steps, self.update_steps = accum_steps, update_steps
        self.grad_clip, self.max_staleness = grad_clip, max_staleness
        self.micro_batch_size = micro_batch_size
        self.keep_last_versions = keep_last_versions
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir is not None else None
        for key in COUNTERS:
            setattr(self, key, 0)
        self.last_grad_norm = 0.0
        self.open_micro_batches = 0  # in the contribution being built
        self.pending_contributions = 0
        self._open_versions: list[int] = []
        self._pending_versions: list[int] = []  # one tag per pending contribution

    # ------------------------------------------------------------ staleness
    def staleness(self, version: int) -> int:
        return self.version - version

    def filter_stale(self, items: Sequence, version_of: Callable = lambda s: s.version) -> list:
        """Items (samples, or anything `version_of` reads a version from) generated at most
        `max_staleness` versions ago; the rest are counted in `dropped_stale`."""
        kept = [s for s in items if self.staleness(version_of(s)) <= self.max_staleness]
        self.dropped_stale += len(items) - len(kept)
        return kept

    # ------------------------------------------------------------ gradients
    def backward(self, loss: torch.Tensor, version: int | None = None) -> bool:
        """Backpropagate one micro-batch loss (`version`: oldest version among its samples,
        None for a padding batch). True when `update_steps` contributions are in: step now."""
        loss.backward()
        self.open_micro_batches += 1
        self.total_micro_batches += 1
        if version is not None:
            self._open_versions.append(version)
        if self.open_micro_batches == self.accum_steps:
            self._close_contribution()
        return self.pending_contributions == self.update_steps

    def close_open_contribution(self) -> bool:
        """Count a short contribution as one (end of the samples); True when a step is pending."""
        if self.open_micro_batches:
            self._close_contribution()
        return self.pending_contributions > 0

    def _close_contribution(self) -> None:
        tag = min(self._open_versions) if self._open_versions else self.version
        self._pending_versions.append(tag)
        self.pending_contributions += 1
        self.total_contributions += 1
        self.open_micro_batches, self._open_versions = 0, []

    def _params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.policy.parameters() if p.grad is not None]

    def step(self) -> StepResult:
        """Average the pending contributions, clip, guard, AdamW step, version += 1."""
        params = self._params()
        count = self.pending_contributions
        if count == 0:
            raise RuntimeError("step() with no pending contribution: call it when backward() returns True")
        self.pending_contributions, self._pending_versions = 0, []
        with torch.no_grad():
            for p in params:  # the average of the contributions
                p.grad.div_(count)
        max_norm = self.grad_clip if self.grad_clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm) if params else torch.tensor(0.0)
        # DTensor grads give the true global norm (all ranks agree, so they skip together)
        norm = float((norm.full_tensor() if isinstance(norm, DTensor) else norm).item())
        self.last_grad_norm = norm
        if not math.isfinite(norm):
            self.skipped_nonfinite += 1
            self.optimizer.zero_grad(set_to_none=True)
            log.warning("non-finite gradient norm (%s): step skipped, weights unchanged", norm)
            return StepResult(False, self.version, norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        self.global_step += 1
        if self.keep_last_versions > 0:
            self._snapshot()
        return StepResult(True, self.version, norm)

    # ------------------------------------------------------------ versions on disk
    def _snapshot(self) -> None:
        from safetensors.torch import save_file

        state = self.policy.full_state_dict()  # collective: every rank gathers
        if dist.is_initialized() and dist.get_rank() != 0:
            return
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        contiguous = {k: v.contiguous() for k, v in state.items()}
        save_file(contiguous, self.snapshot_dir / f"version_{self.version:06d}.safetensors", metadata={"format": "pt"})
        for old in sorted(self.snapshot_dir.glob("version_*.safetensors"))[: -self.keep_last_versions]:
            old.unlink()

    # ------------------------------------------------------------ reporting and state
    def stats(self) -> dict:
        """What the orchestrator's /stats reported, plus the in-process counters."""
        return {
            "global_step": self.global_step,
            "version": self.version,
            "pending_contributions": self.pending_contributions,
            "update_steps": self.update_steps,
            "accum_steps": self.accum_steps,
            "total_contributions": self.total_contributions,
            "queue_size": self.open_micro_batches,  # micro-batches in the unfinished contribution
            "global_batch_size": self.micro_batch_size * world_size() * self.accum_steps * self.update_steps,
            "dropped_stale": self.dropped_stale,
            "skipped_nonfinite": self.skipped_nonfinite,
            "last_grad_norm": self.last_grad_norm,
            "oldest_pending_version": min(self._pending_versions, default=None),  # staleness of what the next step uses
        }

    def state_dict(self) -> dict:
        state = {key: getattr(self, key) for key in COUNTERS}
        state.update(pending_contributions=self.pending_contributions, open_micro_batches=self.open_micro_batches)
        return state

    def load_state_dict(self, state: dict) -> None:
        for key in COUNTERS:
            setattr(self, key, state[key])
        if state.get("pending_contributions") or state.get("open_micro_batches"):
            # their gradients are not in a checkpoint; resuming starts a fresh contribution
            log.warning("checkpoint had pending gradient contributions; they are discarded")
        self.pending_contributions, self.open_micro_batches = 0, 0
        self._open_versions, self._pending_versions = [], []

    def optimizer_state_dict(self) -> dict:
        """Full optimizer state (collective; complete on rank 0)."""
        return self.policy.optimizer_state(self.optimizer)

    def load_optimizer_state_dict(self, state: dict) -> None:
        self.policy.load_optimizer_state(self.optimizer, state)


def build_aggregator(algorithm: AlgorithmConfig, policy: Policy, *, snapshot_dir: str | Path | None = None) -> Aggregator:
    """AdamW over the trainable parameters + the Aggregator, as the algorithm group says."""
    a = algorithm
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=a.lr, weight_decay=a.weight_decay, betas=a.betas)
    return Aggregator(
        policy,
        optimizer,
        accum_steps=a.accum_steps,
        update_steps=a.update_steps,
        grad_clip=a.grad_clip,
        max_staleness=a.max_staleness,
        micro_batch_size=a.micro_batch_size,
        keep_last_versions=a.keep_last_versions,
        snapshot_dir=snapshot_dir,
    )
