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
Exact: a call is known by the bytes its child receives (the program's source, the entry point
and the marshalled arguments, `precheck.marshalled_args`), not by how the arguments print:
every NaN prints `nan`, and a result remembered for f(nan) answered f(-nan), which a program can
tell apart (`math.copysign`). Bounded: what is kept is the worker's raw reply, parsed afresh for
each hit, so each caller gets objects of its own and the memory held is the bytes counted (a
parsed set held 32x its reply's size); an entry counts its reply, its key and ENTRY_BYTES.
Not remembered: a worker that died or hung (`crashed`), a reply the parent refused
(`bad_reply`), a call whose arguments are not literal values (decided in the parent anyway),
and entries beyond the round's byte budget.
`stats()` adds `reused`: calls answered from memory (not counted in `calls`, which counts
runs).
"""

from __future__ import annotations

from collections.abc import Sequence

from unified.sandbox.exec_types import ExecCall, ExecResult
from unified.sandbox.executor import result_from_reply
from unified.sandbox.precheck import marshalled_args
from unified.values import LiteralError

NOT_REMEMBERED = ("crashed", "bad_reply")  # infrastructure failures: the next run may differ
BUDGET_BYTES = 64 << 20  # raw replies (and their keys) remembered per round
ENTRY_BYTES = 256  # one entry's dict slot, tuples and object headers, beyond its counted bytes


def call_key(call: ExecCall, max_chars: int = 1 << 20) -> tuple[str, str, bytes] | None:
    """(source, entry, the marshalled arguments the child receives); None when the arguments are
    not literal values (the executor refuses the call in the parent)."""
    try:
        return call.code, call.entry, marshalled_args(call.args, max_chars)
    except (LiteralError, TypeError, ValueError, RecursionError):
        return None


class ReusingExecutor:
    """A local `Executor` (it needs `run_replies`) that runs each distinct call once between `forget()`s."""

    def __init__(self, inner, budget_bytes: int = BUDGET_BYTES):
        self._inner, self._budget = inner, budget_bytes
        self._memo: dict[tuple, tuple[bytes | ExecResult, int]] = {}  # key -> (raw reply, worker that ran it)
        self._bytes = self._reused = 0
        self._max_output = inner.config.max_output_bytes
        self._max_args = max(self._max_output, 1 << 20)  # as the executor's own check (sandbox.precheck)

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

    @property
    def remembered_bytes(self) -> int:
        """The bytes counted against the budget: never more than it."""
        return self._bytes

    def stats(self) -> dict[str, int]:
        return {**self._inner.stats(), "reused": self._reused}

    def run(self, code: str, entry: str, args: tuple = ()) -> ExecResult:
        return self.run_batch([ExecCall(code, entry, tuple(args))])[0]

    def run_batch(self, calls: Sequence[ExecCall]) -> list[ExecResult]:
        return [result for result, _ in self._first(calls)]

    def run_twice(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, ExecResult]]:
        """The determinism check: a program its bans refuse is "banned" (however it ran before)."""
        banned = [self._inner.determinism(c) for c in calls]
        if any(b is not None for b in banned):
            keep = [i for i, b in enumerate(banned) if b is None]
            pairs = dict(zip(keep, self.run_twice([calls[i] for i in keep]) if keep else []))
            return [pairs[i] if b is None else (b, b) for i, b in enumerate(banned)]
        first = self._first(calls)
        again = [i for i, (result, _) in enumerate(first) if result.ok]
        replies, _ = self._inner.run_replies([calls[i] for i in again], avoid=[first[i][1] for i in again])
        second = {i: self._inner.result(reply) for i, reply in zip(again, replies)}
        return [(result, second.get(i, result)) for i, (result, _) in enumerate(first)]

    def _first(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, int]]:
        """(result, worker) per call: remembered, else run (each distinct call of the batch once).
        Every result is parsed from its raw reply for its own position: no two share objects."""
        keys = [call_key(c, self._max_args) for c in calls]
        todo: dict = {}  # key (or the position, for a call without one) -> index of its first call, in order
        for i, key in enumerate(keys):
            slot = i if key is None else key
            if (key is None or key not in self._memo) and slot not in todo:
                todo[slot] = i
        replies, ran_on = self._inner.run_replies([calls[i] for i in todo.values()]) if todo else ([], [])
        ran: dict = {}
        out: list = [None] * len(calls)
        for (slot, i), reply, worker in zip(todo.items(), replies, ran_on):
            out[i] = (self._inner.result(reply), worker)  # counted once: one run
            ran[slot] = (reply, worker)
            if keys[i] is not None and out[i][0].status not in NOT_REMEMBERED:
                self._remember(keys[i], reply, worker)
        for i, key in enumerate(keys):
            if out[i] is None:
                reply, worker = ran[key] if key in ran else self._memo[key]
                out[i] = (result_from_reply(reply, self._max_output), worker)
        self._reused += len(calls) - len(todo)
        return out

    def _remember(self, key: tuple, reply, worker: int) -> None:
        code, entry, args = key
        body = len(reply) if isinstance(reply, bytes) else len(reply.error) + len(reply.stdout)  # decided in the parent
        size = body + len(code) + len(entry) + len(args) + ENTRY_BYTES
        if self._bytes + size > self._budget:
            return
        self._memo[key] = (reply, worker)
        self._bytes += size
