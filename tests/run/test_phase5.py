"""Phase 5's chunking: how many tasks one generation covers, so that no sample is older
than `max_staleness` versions at its last optimizer step; which of phase 1's groups are
still fresh enough to reuse; and how they are packed by the samples that will train (silent
groups ride along, groups with signal over the budget are generated afresh), through
`train_on_tasks` with the real sandbox scoring real `solve` tasks."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from tests.helpers.pipeline_config import pipeline_config
from unified.text.stops import FENCE_END, AnswerEnd

from unified.kinds import BuildOptions
from unified.pipeline.phases import program_sampling
from unified.pipeline.plan import RoundPlan
from unified.pipeline.tasks import build_tasks
from unified.run.phase5 import (
    Learner,
    _reusable,
    pack_by_signal,
    phase_1_groups,
    tasks_per_chunk,
    train_on_tasks,
)
from unified.sandbox.config import ExecutorConfig
from unified.sandbox.executor import Executor
from unified.schema import AlgorithmConfig
from unified.text.prompts import program_prompt
from unified.types import Completion, Problem, SamplingConfig, TestCase


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


@pytest.mark.parametrize(
    "rewards, budget, drop_silent, expected",
    [
        ([[0, 0], [1, 0], [0, 0], [1, 0], [1, 0]], 4, True, [True, True, True, True, False]),  # silent groups are free
        ([[0, 0], [1, 0], [1, 0]], 4, False, [True, True, False]),  # zero_variance=keep: every group trains
        ([[1, 0, 0], [1, 1], [0, 1], [0]], 4, True, [True, True, False, True]),  # first fit: 3, free, 2 > 1 left, a lone 1
        ([[1, 0, 0], [1], [0, 1]], 4, True, [True, True, False]),  # a lone sample trains (no group baseline)
        ([], 4, True, []),
    ],
)
def test_pack_by_signal_counts_only_the_samples_that_train(rewards, budget, drop_silent, expected):
    assert pack_by_signal(rewards, budget, drop_silent) == expected


RIGHT, WRONG = "```python\ndef {0}(x):\n    return x + 1\n```", "```python\ndef {0}(x):\n    return x\n```"


class RecordingEngine:
    """Answers every prompt with wrong code and records what it was asked to generate."""

    def __init__(self, names):
        self.names, self.asked, self.ends = names, [], []

    def generate(self, prompts, sampling, shapes=None, ends=None):
        self.asked.append(list(prompts))
        self.ends.append(list(ends))
        return [[_completion(WRONG.format(self._name(p)), version=7) for _ in range(sampling.n)] for p in prompts]

    def _name(self, messages):
        return next(n for n in self.names if n in messages[-1]["content"])


def _completion(text, version=0):
    return Completion(text, (1, 2), (3, 4), (-1.0, -1.0), "stop", version)


def _train(tasks, learner, executor, sampling, problems, round_index=1, reuse=None, replay=None, supervised=None):
    """`train_on_tasks` on a round whose phase 1 sampled `reuse` (prompt -> its group) as phase 5
    samples, planned with `replay` (problem id -> a found answer) and `supervised` (problem id -> one)."""
    by_prompt = {program_prompt(p): p.problem_id for p in problems}
    data = SimpleNamespace(
        tasks=tuple(tasks),
        problems=list(problems),
        visible_passing=frozenset(),
        program_completions={by_prompt[k]: list(v) for k, v in (reuse or {}).items()},
    )
    plan = replace(
        RoundPlan.of([p.problem_id for p in problems], round_index), sampling=sampling, replay=replay or {}, supervised=supervised
    )
    pipeline = pipeline_config(
        kinds=("solve",),
        num_programs=sampling.n,
        program_temperature=sampling.temperature,
        program_max_tokens=sampling.max_tokens,
    )
    return train_on_tasks(data, learner, executor, pipeline, plan)


@pytest.fixture(scope="module")
def executor():
    ex = Executor(ExecutorConfig(workers=1))
    yield ex
    ex.close()


def test_phase_1s_groups_fill_one_chunk_by_signal_and_the_rest_is_generated_afresh(executor):
    names = [f"inc_{c}" for c in "abcde"]
    problems = [
        Problem(f"Toy/{i}", "toy", f"Write {n}: add one.", n, (TestCase((1,), 2), TestCase((5,), 6))) for i, n in enumerate(names)
    ]
    tasks, rejections = build_tasks(problems, [], [], ("solve",), BuildOptions())
    assert not rejections and len(tasks) == 5
    answers = [
        (WRONG, WRONG),
        (RIGHT, WRONG),
        (WRONG, WRONG),
        (WRONG, RIGHT),
        (RIGHT, WRONG),
    ]  # silent, signal, silent, signal, signal
    reuse = {t.prompt: [_completion(a.format(n)) for a in pair] for t, n, pair in zip(tasks, names, answers)}
    engine = RecordingEngine(names)
    # 1 sample per step, max_staleness 3: 4 steps per generation, a budget of 4 training samples = 2 groups of 2
    algorithm = AlgorithmConfig(micro_batch_size=1, accum_steps=1, update_steps=1, max_staleness=3)
    learner = Learner(SimpleNamespace(version=0), algorithm, engine, pad_token_id=0, update_weights=False)
    result = _train(tasks, learner, executor, SamplingConfig(n=2, temperature=1.0, max_tokens=16, seed=1), problems, reuse=reuse)
    assert result.reused_groups == 4  # both silent groups and the first two with signal
    assert engine.asked == [[tasks[4].messages]]  # the third group with signal: over the budget, sampled again
    by_task = {}
    for row in result.rollouts:
        by_task.setdefault(row.task_id, []).append((row.reward, row.version))
    assert by_task[tasks[1].task_id] == [(1.0, 0), (0.0, 0)]  # phase 1's own samples and scores
    assert by_task[tasks[4].task_id] == [(0.0, 7), (0.0, 7)]  # the fresh generation's
    assert len(result.rollouts) == 10


def test_no_reuse_generates_every_task_in_chunks(executor):
    names = ["inc_a", "inc_b", "inc_c"]
    problems = [Problem(f"Toy/{i}", "toy", f"Write {n}: add one.", n, (TestCase((1,), 2),)) for i, n in enumerate(names)]
    tasks, _ = build_tasks(problems, [], [], ("solve",), BuildOptions())
    engine = RecordingEngine(names)
    algorithm = AlgorithmConfig(micro_batch_size=1, accum_steps=1, update_steps=1, max_staleness=1)  # 2 steps: 1 task of 2
    learner = Learner(SimpleNamespace(version=5), algorithm, engine, pad_token_id=0, update_weights=False)
    result = _train(
        tasks,
        learner,
        executor,
        SamplingConfig(n=2, temperature=1.0, max_tokens=16, seed=1),
        problems,
        reuse={t.prompt: [_completion("x", version=0)] * 2 for t in tasks},
    )
    assert result.reused_groups == 0  # version 0 is too old at version 5
    assert engine.asked == [[t.messages] for t in tasks] and len(result.rollouts) == 6
    assert engine.ends == [[AnswerEnd(FENCE_END, t.entry_point)] for t in tasks]  # free-text answers stop at their end


def test_phase_1s_groups_are_reused_only_when_phase_1_sampled_as_phase_5_does():
    problem = Problem("Toy/0", "toy", "Write inc: add one.", "inc", (TestCase((1,), 2),))
    pipeline = pipeline_config(kinds=("solve",), num_programs=2)
    data = SimpleNamespace(problems=[problem], program_completions={"Toy/0": ["c1", "c2"]})
    same = program_sampling(pipeline, 0)
    assert phase_1_groups(data, pipeline, same) == {program_prompt(problem): ["c1", "c2"]}
    assert (
        phase_1_groups(
            data,
            pipeline,
            SamplingConfig(n=same.n + 1, temperature=same.temperature, top_p=same.top_p, max_tokens=same.max_tokens),
        )
        == {}
    )
    assert phase_1_groups(data, pipeline, replace(same, temperature=same.temperature + 0.1)) == {}
    wide = SimpleNamespace(problems=[problem], program_completions={"Toy/0": ["c1", "c2", "c3"]})  # a discovery group
    assert phase_1_groups(wide, pipeline, same) == {program_prompt(problem): ["c1", "c2", "c3"]}


def test_the_learner_trains_only_when_updates_are_on():
    learner = Learner(SimpleNamespace(version=0), AlgorithmConfig(), engine=None, pad_token_id=0, update_weights=False)
    assert learner.train([], temperature=1.0) is None
    engine = object()
    assert learner.on(engine).engine is engine and learner.engine is None  # bound per phase, built once


class _RecordingLearner:
    """A learner that keeps the samples it is given (no update)."""

    def __init__(self, engine, algorithm):
        self.engine, self.algorithm, self.aggregator, self.samples = engine, algorithm, SimpleNamespace(version=5), []

    def train(self, samples, temperature):
        self.samples.append(list(samples))
        return None


def test_a_found_answer_replays_into_a_later_group_with_its_recorded_logprobs(executor):
    names = ["inc_a", "inc_b", "inc_c"]
    problems = [Problem(f"Toy/{i}", "toy", f"Write {n}: add one.", n, (TestCase((1,), 2),)) for i, n in enumerate(names)]
    tasks, _ = build_tasks(problems, [], [], ("solve",), BuildOptions())
    # a discovery group of 6 (> n = 4): a, all wrong (its replay enters); b, one fresh pass (its replay stays out);
    # c, all wrong and nothing found
    reuse = {
        tasks[0].prompt: [_completion(WRONG.format("inc_a"), 5)] * 6,
        tasks[1].prompt: [_completion(WRONG.format("inc_b"), 5)] * 5 + [_completion(RIGHT.format("inc_b"), 5)],
        tasks[2].prompt: [_completion(WRONG.format("inc_c"), 5)] * 6,
    }
    found = {
        "Toy/0": Completion(RIGHT.format("inc_a"), (1, 2), (3, 4, 5), (-2.5, -0.1, -0.2), "stop", 0),
        "Toy/1": Completion(RIGHT.format("inc_b"), (1, 2), (3,), (-3.0,), "stop", 1),
    }
    learner = _RecordingLearner(RecordingEngine(names), AlgorithmConfig(max_staleness=3))
    result = _train(
        tasks,
        learner,
        executor,
        SamplingConfig(n=4, temperature=1.0, max_tokens=16, seed=1),
        problems,
        round_index=3,
        reuse=reuse,
        replay=found,
    )
    assert result.replayed_groups == 1 and learner.engine.asked == []  # every group came from phase 1
    samples = learner.samples[0]
    groups = {g: [s for s in samples if s.group == g] for g in {s.group for s in samples}}
    assert sorted(len(g) for g in groups.values()) == [4, 4, 4]  # down-sampled to the group size
    replayed = [s for s in samples if s.replayed]
    assert len(replayed) == 1
    assert replayed[0].logprobs == (-2.5, -0.1, -0.2) and replayed[0].version == 0 and replayed[0].reward == 1.0
    (mine,) = [g for g in groups.values() if any(s.replayed for s in g)]
    assert [s.reward for s in mine].count(1.0) == 1  # the replay and three fresh failures: a group with signal
    b_rows = [r for r in result.rollouts if r.task_id == tasks[1].task_id]
    assert [r.reward for r in b_rows].count(1.0) == 1 and not any(r.replayed for r in b_rows)  # the fresh pass kept
    assert sum(r.replayed for r in result.rollouts) == 1 and len(result.rollouts) == 12


def test_without_replay_a_discovery_group_trains_its_max_variance_subset(executor):
    problem = Problem("Toy/0", "toy", "Write inc_a: add one.", "inc_a", (TestCase((1,), 2),))
    tasks, _ = build_tasks([problem], [], [], ("solve",), BuildOptions())
    group = [_completion(WRONG.format("inc_a"), 5)] * 7 + [_completion(RIGHT.format("inc_a"), 5)]
    learner = _RecordingLearner(RecordingEngine(["inc_a"]), AlgorithmConfig(max_staleness=3))
    result = _train(
        tasks,
        learner,
        executor,
        SamplingConfig(n=4, temperature=1.0, max_tokens=16, seed=1),
        [problem],
        reuse={tasks[0].prompt: group},
    )
    assert [s.reward for s in learner.samples[0]] == [0.0, 0.0, 0.0, 1.0] and result.replayed_groups == 0


@pytest.mark.parametrize("reused", [True, False])
def test_found_answers_train_once_in_the_first_chunk_and_are_not_rollout_rows(executor, reused):
    """The supervised term's answers (`supervised`) join the round's first chunk that trains,
    whether phase 1's groups are reused or every task is generated afresh, once, flagged
    `supervised`, each alone in its group; rollouts.parquet keeps only what was sampled."""
    names = ["inc_a", "inc_b", "inc_c"]
    problems = [Problem(f"Toy/{i}", "toy", f"Write {n}: add one.", n, (TestCase((1,), 2),)) for i, n in enumerate(names)]
    tasks, _ = build_tasks(problems, [], [], ("solve",), BuildOptions())
    found = [
        Completion(RIGHT.format("inc_a"), (1, 2), (3, 4, 5), (-2.5, -0.1, -0.2), "stop", 0),
        Completion(RIGHT.format("inc_c"), (1, 9), (3,), (-3.0,), "stop", 4),
    ]
    learner = _RecordingLearner(
        RecordingEngine(names), AlgorithmConfig(micro_batch_size=1, accum_steps=1, update_steps=1, max_staleness=1, sft_coef=1.0)
    )
    reuse = {t.prompt: [_completion(WRONG.format(n), 5), _completion(RIGHT.format(n), 5)] for t, n in zip(tasks, names)}
    result = _train(
        tasks,
        learner,
        executor,
        SamplingConfig(n=2, temperature=1.0, max_tokens=16, seed=1),
        problems,
        round_index=2,
        reuse=reuse if reused else None,
        supervised={"Toy/0": found[0], "Toy/2": found[1]},
    )
    assert len(learner.samples) >= 2  # more than one chunk trained: only the first takes the answers
    first, rest = learner.samples[0], [s for chunk in learner.samples[1:] for s in chunk]
    mine = [s for s in first if s.supervised]
    assert [(s.token_ids, s.logprobs, s.version, s.reward) for s in mine] == [
        ((3, 4, 5), (-2.5, -0.1, -0.2), 0, 1.0),
        ((3,), (-3.0,), 4, 1.0),
    ]
    assert len({s.group for s in mine}) == 2 and not {s.group for s in mine} & {s.group for s in first if not s.supervised}
    assert not any(s.supervised for s in rest)
    assert len(result.rollouts) == 6 and all(r.reward in (0.0, 1.0) for r in result.rollouts)
