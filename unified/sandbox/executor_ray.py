"""The executor's batch API on a Ray cluster (`backend: ray`).

A batch is cut into contiguous chunks; each chunk is one Ray task that runs its calls
through a local `Executor` pool on whatever node Ray picks. A Ray worker process keeps
its pool between tasks (starting one costs ~0.3 s), keyed by the config. Order is
preserved by concatenating chunk results in order.

Results cross the cluster as the workers' raw replies (bytes, the value in them as
LITERAL TEXT) and are turned into values here with `from_literal`, the same
as the local pool: nothing a sandboxed program produced is ever unpickled.

Covered: run_batch / run_twice with the local executor's semantics (run_twice pairs are
run on one node, on different workers of its pool). Not covered: per-node placement or
data locality, retries of a chunk whose Ray worker died (ray.get raises), autoscaling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from unified.sandbox.executor import ExecCall, ExecResult, Executor, ExecutorConfig, Stats, result_from_reply

_POOLS: dict[ExecutorConfig, Executor] = {}  # per Ray worker process, reused across tasks


def _local_pool(config: ExecutorConfig) -> Executor:
    key = dataclasses.replace(config, backend="local", ray_address=None, reuse_results=False)
    if key not in _POOLS:
        _POOLS[key] = Executor(key)
    return _POOLS[key]


def _as_reply(r):
    """A worker's raw reply (bytes), or a final ExecResult decided in the task (banned,
    syntax error: no value, nothing the program wrote)."""
    return r


def run_chunk(config: ExecutorConfig, calls: list[ExecCall], twice: bool) -> list:
    """What one Ray task does: replies for its calls (pairs of replies when `twice`)."""
    pool = _local_pool(config)
    first, ran_on = pool.run_replies(calls)
    if not twice:
        return [_as_reply(r) for r in first]
    second, _ = pool.run_replies(calls, avoid=ran_on)
    return [(_as_reply(a), _as_reply(b)) for a, b in zip(first, second)]


class RayExecutor:
    """Same interface as Executor; batches are spread over the Ray cluster."""

    def __init__(self, config: ExecutorConfig):
        import ray

        self._ray = ray
        self.config = config
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=config.ray_address, include_dashboard=False)
        # Each task runs a pool of `workers` processes, so it reserves that many CPUs.
        self._task = ray.remote(num_cpus=config.workers)(run_chunk)
        self._stats = Stats()

    def stats(self) -> dict[str, int]:
        """The same counters as `Executor.stats()`, over this driver's results."""
        return self._stats.snapshot()

    def _result(self, reply) -> ExecResult:
        return self._stats.count(result_from_reply(reply, self.config.max_output_bytes))

    def run(self, code: str, entry: str, args: tuple = ()) -> ExecResult:
        return self.run_batch([ExecCall(code, entry, tuple(args))])[0]

    def run_batch(self, calls: Sequence[ExecCall]) -> list[ExecResult]:
        return [self._result(r) for r in self._run(calls, twice=False)]

    def run_twice(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, ExecResult]]:
        return [(self._result(a), self._result(b)) for a, b in self._run(calls, twice=True)]

    def _run(self, calls: Sequence[ExecCall], twice: bool) -> list:
        calls = list(calls)
        if not calls:
            return []
        cpus = int(self._ray.cluster_resources().get("CPU", 1))
        chunks = max(1, min(len(calls), 2 * max(1, cpus // self.config.workers)))  # 2 per slot: balance
        size = -(-len(calls) // chunks)
        refs = [self._task.remote(self.config, calls[i : i + size], twice) for i in range(0, len(calls), size)]
        return [reply for chunk in self._ray.get(refs) for reply in chunk]

    def close(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()  # the Ray workers exit; their pools' workers see EOF and exit

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
