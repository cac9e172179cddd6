"""One GPU, two tenants: the rollout engine sleeps while the policy updates.

On one GPU the engine's weights and KV cache sit next to the policy's weights, gradients
and optimizer state. vLLM's sleep mode gives the engine's share back for the update:

    colocation = Colocation(engine, resolve_sleep(rollout.sleep_between_phases, rollout.backend))
    with colocation.session():                   on the way out the engine is awake (also
        train_on_samples(..., turns=colocation)  after a skipped step or an exception)
            each optimizer step:  updating()   engine.sleep()  before the step's first forward
                                  forward / backward ... aggregator.step()
                                  pushing()    engine.wake_up()  then push_weights(engine)

so the order is always sleep -> update -> wake -> push, and the next generate finds the
engine awake. With sleep off (`enabled=False`) the engine is never put to sleep, and the
turns still measure the GPU memory at the update (`round_metrics()`, CUDA only).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

GIB = 2**30


def resolve_sleep(setting: bool | None, backend: str, cuda: bool | None = None) -> bool:
    """`rollout.sleep_between_phases`: null (auto) is on for vLLM on CUDA (the only backend
    whose sleep frees memory), off otherwise; true or false as given."""
    if setting is not None:
        return bool(setting)
    cuda = torch.cuda.is_available() if cuda is None else cuda
    return backend == "vllm" and cuda


class Colocation:
    """Whose turn it is on the device: the engine's (generate, push) or the policy's
    (forward, backward, optimizer step). Mutable: it follows the engine's state and keeps
    the round's GPU memory at the update."""

    def __init__(self, engine, enabled: bool):
        self.engine = engine
        self.enabled = bool(enabled) and engine is not None
        self.sleeps = 0  # this round's
        self._updating = False
        self._base_bytes = 0  # device memory in use at the update's start, less torch's own
        self._peak_bytes: int | None = None  # this round's highest, None: not measured

    def updating(self) -> None:
        """The policy's turn starts (before a forward): the engine sleeps. Idempotent."""
        if self._updating:
            return
        if self.enabled:
            self.engine.sleep()
            self.sleeps += 1
        self._updating = True
        if _cuda_in_use():
            free, total = torch.cuda.mem_get_info()
            torch.cuda.reset_peak_memory_stats()
            self._base_bytes = (total - free) - torch.cuda.memory_allocated()

    def pushing(self) -> None:
        """The engine's turn (before a push or a generate): the update's memory is noted,
        the engine wakes. Idempotent."""
        if self._updating:
            self._updating = False
            if _cuda_in_use():
                peak = self._base_bytes + torch.cuda.max_memory_allocated()
                self._peak_bytes = max(self._peak_bytes or 0, peak)
        if self.enabled and self.engine.asleep:
            self.engine.wake_up()

    @contextmanager
    def session(self):
        """Around one `train_on_samples`: whatever happens inside, the engine leaves awake."""
        try:
            yield self
        finally:
            self.pushing()

    def round_metrics(self) -> dict:
        """`memory/gpu_update_gib` (device memory in use at the update's peak: what was in
        use when it started, the engine asleep or not, plus the update's own peak
        allocation; CUDA only) and `engine/sleeps`; then starts the next round's count."""
        out = {}
        if self._peak_bytes is not None:
            out["memory/gpu_update_gib"] = self._peak_bytes / GIB
        if self.enabled:
            out["engine/sleeps"] = self.sleeps
        self.sleeps, self._peak_bytes = 0, None
        return out


def _cuda_in_use() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()
