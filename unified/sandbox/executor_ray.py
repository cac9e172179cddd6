"""The executor's batch API on a Ray cluster (`backend: ray`), run the way Ray runs tasks.

A batch is cut into contiguous chunks; each chunk is one Ray task that runs its calls
through a local `Executor` pool on the node Ray picks. A Ray worker process keeps its pool
between tasks (starting one costs ~0.3 s), keyed by the config. Order is preserved by
concatenating chunk results in order. Which Ray instance: `ray_session.py`.

Ray's own mechanisms, nothing home-made:
- placement: `scheduling_strategy="SPREAD"` spreads the chunks over the cluster's nodes, and
  each chunk asks for `workers` CPUs (its pool's size);
- a lost node or Ray worker: the chunk is retried by Ray (`max_retries`, also for an
  exception raised in the task: `retry_exceptions`). A retry is safe: a sandbox call has no
  effect outside itself, and the retried chunk runs every call of it again, so its results
  are those of an undisturbed run (pairs of `run_twice` again on two workers of one pool);
  a chunk that completed is not run again (its replies are already with this driver);
- a chunk that fails past its retries raises one line naming the chunk, its calls, the
  node it ran on (or the nodes lost) and Ray's reason; a batch that no live node can run
  (every node with enough CPUs gone) raises too, instead of waiting for a node forever.

`stats()` adds to the local counters which node ran each call (`calls_node_<i>`, numbered as
in `ray_session`; `node_numbers()` maps Ray's node ids to them) and how many calls were run again by a retry (`retried_calls`: a chunk's
calls times its extra attempts); the round's metrics log them as `executor/...`.

Results cross the cluster as the workers' raw replies (bytes, the value in them as
LITERAL TEXT) and are turned into values here with `from_literal`, the same
as the local pool: nothing a sandboxed program produced is ever unpickled.

Not covered: data locality, autoscaling (a batch that needs a node the cluster does not
have fails instead of waiting for one), a lost driver (the trainer's own restart covers it).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from unified.sandbox import ray_session
from unified.sandbox.executor import ExecCall, ExecResult, Executor, ExecutorConfig, Stats, result_from_reply

_POOLS: dict[ExecutorConfig, Executor] = {}  # per Ray worker process, reused across tasks
WAIT_S = 5.0  # how often a waiting batch checks that some live node can still run its chunks


def _local_pool(config: ExecutorConfig) -> Executor:
    key = dataclasses.replace(config, backend="local", ray_address=None, reuse_results=False)
    if key not in _POOLS:
        _POOLS[key] = Executor(key)
    return _POOLS[key]


@dataclass(frozen=True)
class ChunkResult:
    node_id: str  # the Ray node that ran the chunk (its last attempt)
    attempt: int  # 0 on the first run; k after k retries (Ray's attempt number)
    replies: list  # raw replies or final ExecResults (pairs of them for run_twice), in call order


def _attempt() -> int:
    """Ray's attempt number of the running task (0 = first run): the public runtime context has no
    accessor for it, the core worker does."""
    from ray._private.worker import global_worker

    return int(global_worker.core_worker.get_current_task_attempt_number())


def run_chunk(config: ExecutorConfig, calls: list[ExecCall], twice: bool) -> ChunkResult:
    """What one Ray task does: replies for its calls (pairs of replies when `twice`)."""
    import ray

    pool = _local_pool(config)
    first, ran_on = pool.run_replies(calls, twice=twice)  # the determinism bans hold in run_twice only
    if twice:
        second, _ = pool.run_replies(calls, avoid=ran_on, twice=True)
        first = list(zip(first, second))
    return ChunkResult(ray.get_runtime_context().get_node_id(), _attempt(), list(first))


class RayExecutor:
    """Same interface as Executor; batches are spread over the Ray cluster."""

    def __init__(self, config: ExecutorConfig):
        import ray

        self._ray = ray
        self.config = config
        self._owns_ray = ray_session.connect(config.ray_address)
        self._task = ray.remote(run_chunk).options(
            num_cpus=config.workers,  # each task runs a pool of `workers` processes
            scheduling_strategy="SPREAD",
            max_retries=config.ray_max_retries,
            retry_exceptions=config.ray_max_retries > 0,
        )
        self._stats = Stats()
        self._nodes: Counter = Counter()  # node number -> calls it ran (their final run)
        self._numbers: dict[str, int] = {}  # node id -> its number (ray_session.number_new_nodes)
        self._retried = 0

    def stats(self) -> dict[str, int]:
        """The same counters as `Executor.stats()`, over this driver's results, plus
        `retried_calls` and `calls_node_<i>` (see the module docstring)."""
        nodes = {f"calls_node_{i}": n for i, n in sorted(self._nodes.items())}
        return {**self._stats.snapshot(), "retried_calls": self._retried, **nodes}

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
        spans = [(i, min(i + size, len(calls))) for i in range(0, len(calls), size)]
        before = {n["NodeID"] for n in ray_session.node_table() if n.get("Alive")}
        refs = [self._task.remote(self.config, calls[a:b], twice) for a, b in spans]
        results = self._gather(refs, spans, before)
        self._count(results)
        return [reply for result in results for reply in result.replies]

    def _gather(self, refs: list, spans: list, before: set) -> list[ChunkResult]:
        """Every chunk's result, in order. Waits while some live node can run a chunk; a chunk
        that failed past its retries raises one line (`_failure`)."""
        pending = list(refs)
        while pending:
            _, pending = self._ray.wait(pending, num_returns=len(pending), timeout=WAIT_S)
            if pending and not ray_session.live_nodes_fitting(self.config.workers):
                for ref in pending:
                    self._ray.cancel(ref, force=True)
                raise RuntimeError(
                    f"no live Ray node has the {self.config.workers} CPU(s) a sandbox chunk asks for "
                    f"(executor.workers): {len(pending)} of {len(refs)} chunk(s) could not run; "
                    f"nodes lost during the batch: {self._lost(before) or 'none'}"
                )
        out = []
        for k, ref in enumerate(refs):
            try:
                out.append(self._ray.get(ref))
            except self._ray.exceptions.RayError as exc:
                raise RuntimeError(self._failure(k, spans[k], exc, before)) from None
        return out

    def _failure(self, k: int, span: tuple, exc: Exception, before: set) -> str:
        cause = getattr(exc, "cause", None)  # a RayTaskError's exception raised in the task
        reason = " ".join(f"{type(cause or exc).__name__}: {cause or exc}".split())[:400]
        where = (
            f"on node {exc.ip}" if getattr(exc, "ip", None) else f"nodes lost during the batch: {self._lost(before) or 'none'}"
        )
        return (
            f"sandbox chunk {k} (calls {span[0]}-{span[1] - 1}) failed after {self.config.ray_max_retries} "
            f"retr{'y' if self.config.ray_max_retries == 1 else 'ies'} (executor.ray_max_retries), {where}: "
            f"{reason}"
        )

    def _lost(self, before: set) -> str:
        return ", ".join(
            ray_session.node_name(n) for n in ray_session.node_table() if n["NodeID"] in before and not n.get("Alive")
        )

    def node_numbers(self) -> dict[str, int]:
        """Ray node id -> the number its calls are counted under (`calls_node_<number>`)."""
        self._numbers = ray_session.number_new_nodes(self._numbers)
        return dict(self._numbers)

    def _count(self, results: list[ChunkResult]) -> None:
        if any(r.node_id not in self._numbers for r in results):
            self.node_numbers()
        for result in results:
            self._nodes[self._numbers.get(result.node_id, -1)] += len(result.replies)
            self._retried += len(result.replies) * result.attempt

    def close(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()  # the Ray workers exit; their pools' workers see EOF and exit

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
