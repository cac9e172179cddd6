"""Phase 5's chunking (pure): how many tasks one generation covers, so that no sample is
older than `max_staleness` versions at its last optimizer step, and which of phase 1's
groups are still fresh enough to reuse."""

from types import SimpleNamespace

import pytest

from unified.run.phase5 import _reusable, tasks_per_chunk
from unified.schema import AlgorithmConfig


@pytest.mark.parametrize(
    "sizes, n, expected",
    [
        # micro x accum x update = 32 samples per step; (16 + 1) // 1 = 17 steps per generation
        (dict(), 16, 34),  # 17 x 32 / 16
        (dict(), 5, 109),  # ceil(17 x 32 / 5): whole tasks, rounded up
        (dict(max_staleness=0), 16, 2),  # one step per generation: 32 samples = 2 tasks of 16
        (dict(max_staleness=3, ppo_epochs=2), 8, 8),  # 4 // 2 = 2 steps, trained twice: 2 x 32 / 8
        (dict(max_staleness=0, ppo_epochs=4), 8, 4),  # at least one step's worth: 1 x 32 / 8
        (dict(micro_batch_size=1, accum_steps=1, update_steps=1, max_staleness=0), 64, 1),  # at least one task
    ],
)
def test_tasks_per_chunk_covers_the_staleness_budget(sizes, n, expected):
    algorithm = AlgorithmConfig(**sizes)
    assert tasks_per_chunk(algorithm, n) == expected
    steps = algorithm.steps_per_generation
    assert steps * algorithm.ppo_epochs <= algorithm.max_staleness + 1 or steps == 1
    # the chunk's samples fill the steps of one generation, no more than one task over
    assert (expected - 1) * n < max(steps * algorithm.samples_per_step, n)


def test_reusable_groups_are_those_fresh_at_the_chunks_last_step():
    algorithm = AlgorithmConfig(max_staleness=3)  # 4 steps per generation
    group = lambda version: [SimpleNamespace(version=version), SimpleNamespace(version=version + 1)]  # noqa: E731
    reuse = {"old": group(0), "edge": group(3), "new": group(6), "empty": []}
    # at version 6 the chunk's last step is version 9: samples of version >= 9 - 3 = 6 are fresh
    assert set(_reusable(reuse, 6, algorithm)) == {"new"}
    assert set(_reusable(reuse, 3, algorithm)) == {"edge", "new"}
    assert _reusable({}, 0, algorithm) == {} and _reusable(None, 0, algorithm) == {}
