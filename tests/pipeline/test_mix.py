"""`pipeline.mix`: phase 5's tasks in the given shares, from what each kind has this round."""

from __future__ import annotations

from collections import Counter

import pytest

from unified.pipeline.phases import PipelineConfig, mix_tasks
from unified.types import Task


def _tasks(counts: dict[str, int]) -> list[Task]:
    return [
        Task(f"P/{i}#p0:{kind}:{j}", kind, f"P/{i}", f"P/{i}#p0", "prompt", "gold", "f", "", ())
        for kind, n in counts.items()
        for i in range(n)
        for j in range(1)
    ]


def test_the_largest_round_that_keeps_every_share():
    tasks = _tasks({"solve": 100, "deduction": 300, "abduction": 40})
    kept, rejected = mix_tasks(tasks, {"solve": 0.5, "deduction": 0.25, "abduction": 0.25}, seed=0)
    assert Counter(t.kind for t in kept) == {"solve": 80, "deduction": 40, "abduction": 40}  # abduction bounds it: 40 / 0.25
    assert len(rejected) == len(tasks) - len(kept) and {r.reason for r in rejected} == {"over_mix"}
    again, _ = mix_tasks(tasks, {"solve": 0.5, "deduction": 0.25, "abduction": 0.25}, seed=0)
    assert [t.task_id for t in again] == [t.task_id for t in kept]  # seeded


def test_a_kind_without_tasks_drops_out_and_the_others_keep_their_ratio():
    kept, _ = mix_tasks(_tasks({"solve": 100, "deduction": 30}), {"solve": 0.5, "deduction": 0.25, "abduction": 0.25}, seed=1)
    assert Counter(t.kind for t in kept) == {"solve": 60, "deduction": 30}
    kept, rejected = mix_tasks(_tasks({"solve": 10}), {}, seed=1)
    assert len(kept) == 10 and not rejected  # no mix: every task


def test_mix_entries_set_the_kinds_and_bad_ones_are_one_line():
    cfg = PipelineConfig(mix=("solve:0.75", "deduction:0.25"))
    assert cfg.kinds == ("solve", "deduction") and cfg.shares == {"solve": 0.75, "deduction": 0.25}
    for bad in (("solve",), ("solve:x",), ("solve:0",), ("nokind:1",)):
        with pytest.raises(ValueError, match="mix|kinds"):
            PipelineConfig(mix=bad)
    with pytest.raises(ValueError, match="constrain"):
        PipelineConfig(constrain=("solve", "outputs"))
    with pytest.raises(ValueError, match="solve_source"):
        PipelineConfig(solve_source="tests")
