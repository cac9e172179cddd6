"""Each distinct call runs once a round: an executor that remembers its results.

    executor = ReusingExecutor(Executor(config))    # what build_executor gives when executor.reuse_results
    executor.run_batch(calls)                       # a call seen this round: its result, not a new run
    executor.run_twice(calls)                       # the first run may be a remembered one; the second never is
    executor.forget()                               # the round loop calls it as each round starts

A round runs the same program on the same arguments several times: phase 1's visible check,
phase 2's triples on the visible inputs (run twice), phase 5's reward of each of the group's
samples on the visible examples (16 samples of one problem often extract to one program),
and a program that loops forever costs the full CPU limit (`executor.timeout_s`, 2 s) each
time. Results are decided by CPU time, not the wall clock (`sandbox.executor`), so a second
run of the same call is a second draw of the same thing; this module hands back the first.

What stays as it was: every call that IS run runs in a fresh child, in a fresh world (nothing
of one run reaches another: the remembered result is a value read in the parent); the
determinism check (`run_twice`) still compares two real runs on different workers: the
first may be remembered (its worker is remembered with it), the second is always run. A
call whose first run failed is not run a second time: a failure decides the triple's
rejection on its own (`pipeline.ipo.classify_run`), so its pair is (first, first).
Not remembered: a worker that died or hung (`crashed`), a reply the parent refused
(`bad_reply`), and replies beyond the round's byte budget (memory stays bounded).
`stats()` adds `reused`: calls answered from memory (not counted in `calls`, which counts
runs).
"""

from __future__ import annotations

from collections.abc import Sequence

from unified.sandbox.exec_types import ExecCall, ExecResult

NOT_REMEMBERED = ("crashed", "bad_reply")  # infrastructure failures: the next run may differ
BUDGET_BYTES = 64 << 20  # raw replies remembered per round


def call_key(call: ExecCall) -> tuple[str, str, str]:
    """Equal for calls that run the same code on equal arguments (`repr` tells 1, 1.0 and True apart)."""
    return call.code, call.entry, repr(call.args)


class ReusingExecutor:
    """A local `Executor` (it needs `run_replies`) that runs each distinct call once between `forget()`s."""

    def __init__(self, inner, budget_bytes: int = BUDGET_BYTES):
        self._inner, self._budget = inner, budget_bytes
        self._memo: dict[tuple, tuple[ExecResult, int]] = {}  # key -> (result, worker that ran it)
        self._bytes = self._reused = 0

    def __getattr__(self, name):  # config, isolation, limits, close ...: the pool's own
        return getattr(self._inner, name)

    def __enter__(self) -> ReusingExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self._inner.close()

    def forget(self) -> None:
        """Start afresh (a new round): nothing remembered."""
        self._memo.clear()
        self._bytes = 0

    def stats(self) -> dict[str, int]:
        return {**self._inner.stats(), "reused": self._reused}

    def run(self, code: str, entry: str, args: tuple = ()) -> ExecResult:
        return self.run_batch([ExecCall(code, entry, tuple(args))])[0]

    def run_batch(self, calls: Sequence[ExecCall]) -> list[ExecResult]:
        return [result for result, _ in self._first(calls)]

    def run_twice(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, ExecResult]]:
        first = self._first(calls)
        again = [i for i, (result, _) in enumerate(first) if result.ok]
        replies, _ = self._inner.run_replies([calls[i] for i in again], avoid=[first[i][1] for i in again])
        second = {i: self._inner.result(reply) for i, reply in zip(again, replies)}
        return [(result, second.get(i, result)) for i, (result, _) in enumerate(first)]

    def _first(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, int]]:
        """(result, worker) per call: remembered, else run (each distinct call of the batch once)."""
        keys = [call_key(c) for c in calls]
        todo: dict[tuple, int] = {}  # key -> index of its first call, in order
        for i, key in enumerate(keys):
            if key not in self._memo and key not in todo:
                todo[key] = i
        replies, ran_on = self._inner.run_replies([calls[i] for i in todo.values()]) if todo else ([], [])
        fresh = {}
        for key, reply, worker in zip(todo, replies, ran_on):
            fresh[key] = (self._inner.result(reply), worker)
            self._remember(key, reply, fresh[key])
        self._reused += len(calls) - len(todo)
        return [fresh[key] if key in fresh else self._memo[key] for key in keys]

    def _remember(self, key: tuple, reply, entry: tuple[ExecResult, int]) -> None:
        size = len(reply) if isinstance(reply, bytes) else 0  # a result decided in the parent (banned) is small
        if entry[0].status in NOT_REMEMBERED or self._bytes + size > self._budget:
            return
        self._memo[key] = entry
        self._bytes += size
