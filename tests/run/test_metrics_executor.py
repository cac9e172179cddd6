"""`executor/` round metrics: this round's sandbox calls and timeouts by kind (deltas, so a
resumed run logs what an uninterrupted one logs)."""

from unified.run import metrics as M
from unified.sandbox.exec_types import ExecResult, Stats


class _Counting:
    def __init__(self):
        self._stats = Stats()

    def stats(self):
        return self._stats.snapshot()

    def returns(self, *results):
        for r in results:
            self._stats.count(r)


def test_executor_metrics_are_per_round_deltas_with_timeouts_by_kind():
    ex = _Counting()
    ex.returns(ExecResult("ok"), ExecResult("timeout", timeout="cpu"), ExecResult("timeout", timeout="wall"))
    first = M.executor_metrics(ex)
    assert first["executor/calls"] == 3 and first["executor/ok"] == 1
    assert first["executor/timeout_cpu"] == 1 and first["executor/timeout_wall"] == 1 and first["executor/timeout"] == 2
    ex.returns(ExecResult("ok"), ExecResult("error"))
    second = M.executor_metrics(ex)
    assert second["executor/calls"] == 2 and second["executor/error"] == 1
    assert second["executor/timeout_cpu"] == 0 and second["executor/timeout_wall"] == 0
    assert M.executor_metrics(_Counting())["executor/calls"] == 0  # another executor starts from its own zero
