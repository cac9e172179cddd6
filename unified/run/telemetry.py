"""Compute per role (actor, learner, evaluator), the accounting RALO's `/compute/report` kept.

    ledger = ComputeLedger()
    engine = MeteredEngine(engine, ledger)       # generate(): actor or evaluator time
    with ledger.measure("update", tokens=n):     # the learner
        ...
    ledger.metrics()  -> {"compute/generation_s": ..., "compute/update_tokens": ..., ...}

Roles: `generation` (the actor: programs, proposed inputs, phase-5 rollouts),
`update` (the learner: forward, backward, optimizer step, push) and `evaluation`
(the evaluator: greedy pass@1 on hidden tests). Seconds are device-seconds: on CUDA the
wall time between synchronised points times the number of ranks' GPUs (one each); on CPU
the process's CPU time (`time.process_time`: every thread of this process, vLLM's
included; sandbox subprocesses are not counted). Totals are cumulative over the run and
saved in checkpoints, so a resumed run continues them.

How a generate call is attributed: greedy decoding (temperature 0) is used only to
evaluate in this trainer, so greedy calls count as evaluation, sampled calls as generation.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

ROLES = ("generation", "update", "evaluation")


def device_clock() -> float:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        return time.perf_counter()
    return time.process_time()


class ComputeLedger:
    """Cumulative device-seconds and tokens per role (mutable; one per process)."""

    def __init__(self):
        self.seconds = {r: 0.0 for r in ROLES}
        self.tokens = {r: 0 for r in ROLES}

    @contextmanager
    def measure(self, role: str, tokens: int = 0):
        if role not in ROLES:
            raise ValueError(f"unknown compute role {role!r}; one of {ROLES}")
        start = device_clock()
        try:
            yield self
        finally:
            self.seconds[role] += device_clock() - start
            self.tokens[role] += int(tokens)

    def add_tokens(self, role: str, tokens: int) -> None:
        self.tokens[role] += int(tokens)

    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def metrics(self) -> dict[str, float]:
        out = {}
        for r in ROLES:
            out[f"compute/{r}_s"] = self.seconds[r]
            out[f"compute/{r}_tokens"] = float(self.tokens[r])
        out["compute/total_s"] = self.total_seconds()
        return out

    def state_dict(self) -> dict:
        return {"seconds": dict(self.seconds), "tokens": dict(self.tokens)}

    def load_state_dict(self, state: dict) -> None:
        self.seconds = {r: float(state["seconds"].get(r, 0.0)) for r in ROLES}
        self.tokens = {r: int(state["tokens"].get(r, 0)) for r in ROLES}


class MeteredEngine:
    """The engine, with every generate() timed and its completion tokens counted."""

    def __init__(self, engine, ledger: ComputeLedger):
        self.engine, self.ledger = engine, ledger

    def generate(self, prompts, sampling, shapes=None, ends=None):
        role = "evaluation" if sampling.temperature <= 0 else "generation"
        with self.ledger.measure(role):
            out = self.engine.generate(prompts, sampling, shapes, ends)
        self.ledger.add_tokens(role, sum(len(c.token_ids) for group in out for c in group))
        return out

    def __getattr__(self, name):  # version, push, tokenizer, ...: the engine's own
        return getattr(self.engine, name)
