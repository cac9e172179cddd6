"""Executor backends: one module each (a class built from an `ExecutorConfig`, used as a
context manager, with `run`/`run_batch`) plus one line in `EXECUTORS`."""

from __future__ import annotations

from unified.sandbox.executor import Executor, ExecutorConfig
from unified.sandbox.executor_ray import RayExecutor
from unified.sandbox.reuse import ReusingExecutor

EXECUTORS: dict[str, type[Executor]] = {
    "local": Executor,  # a warm pool of sandbox workers on this machine
    "ray": RayExecutor,  # chunks of calls on a Ray cluster, each run by a local pool there
}


def build_executor(config: ExecutorConfig) -> Executor:
    """The executor for `config.backend`; the local pool answers repeated calls from memory under
    `reuse_results` (sandbox/reuse.py), the ray backend runs every call."""
    if config.backend not in EXECUTORS:
        raise ValueError(f"executor.backend must be one of {', '.join(EXECUTORS)}, got {config.backend!r}")
    executor = EXECUTORS[config.backend](config)
    return ReusingExecutor(executor) if config.reuse_results and config.backend == "local" else executor
