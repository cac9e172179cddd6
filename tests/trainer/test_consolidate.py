"""Consolidation (`trainer/consolidate.py`): targets trained by plain NLL in passes until each
target's every token is the argmax by the margin under teacher forcing, then greedy decoding
reproduces them; targets already held train nothing; the pass cap is kept."""

from dataclasses import replace

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.aggregator import build_aggregator
from unified.trainer.batching import collate
from unified.trainer.config import AlgorithmConfig
from unified.trainer.consolidate import consolidate, margins, token_margins
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.update import Turns
from unified.types import Sample


@pytest.fixture(scope="module")
def policy():
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="float32")


def _target(prompt, tokens) -> Sample:
    return Sample(tuple(prompt), tuple(tokens), (0.0,) * len(tokens), 1.0, -1, 0, kind="consolidation", supervised=True)


def _greedy(policy, prompt, length) -> list[int]:
    """The policy's own greedy continuation, token by token (the reference for "reproduced")."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(length):
            logits = policy.module(input_ids=torch.tensor([ids])).logits[0, -1]
            ids.append(int(logits.argmax()))
    return ids[len(prompt) :]


def test_a_margin_is_positive_exactly_where_greedy_picks_the_token(policy):
    prompt = [5, 6, 7, 8]
    own = _greedy(policy, prompt, 5)
    other = [own[0], (own[1] + 1) % 100 + 10, *own[2:]]  # the second token is not the argmax
    mb = collate([_target(prompt, own), _target(prompt, other)], [torch.ones(5)] * 2, 0)
    m = token_margins(mb, policy)
    assert (m[0] > 0).all() and m[1, 0] > 0 and m[1, 1] < 0


def test_consolidation_makes_the_targets_the_greedy_answers_and_moves_the_weights(policy):
    cfg = AlgorithmConfig(lr=1e-3, consolidate_passes=30, consolidate_margin=0.5, consolidate_batch=2)
    targets = [
        _target([5, 6, 7, 8], [31, 32, 33, 34]),
        _target([9, 10, 11], [41, 42, 43, 44, 45, 46]),
        _target([12, 13], [51, 52]),
    ]
    agg = build_aggregator(cfg, policy)
    before = {k: v.detach().clone() for k, v in policy.module.named_parameters()}
    assert (margins(targets, policy, 0, 2, Turns()) < 0).all()  # none is greedy's yet
    stats = consolidate(targets, agg, cfg, engine=None, pad_token_id=0)
    assert stats.targets == 3 and stats.held_before == 0 and stats.held_after == 3
    assert (
        1 <= stats.passes <= 30
        and stats.passes <= stats.steps <= 2 * stats.passes
        and stats.nll > 0
        and agg.version == stats.steps
    )
    assert any(not torch.equal(before[k], v) for k, v in policy.module.named_parameters())
    for t in targets:
        assert _greedy(policy, t.prompt_token_ids, len(t.token_ids)) == list(t.token_ids)
    again = consolidate(targets, agg, cfg, engine=None, pad_token_id=0)  # already held: nothing trains
    assert (again.passes, again.steps, again.held_before, again.held_after) == (0, 0, 3, 3)


def test_the_pass_cap_holds_and_zero_passes_trains_nothing(policy):
    targets = [_target([5, 6], [61, 62, 63])]
    cfg = AlgorithmConfig(lr=1e-9, consolidate_passes=2, consolidate_margin=0.5, consolidate_batch=2)
    agg = build_aggregator(cfg, policy)
    stats = consolidate(targets, agg, cfg, engine=None, pad_token_id=0)
    assert (stats.passes, stats.steps, stats.held_after) == (2, 2, 0)
    off = consolidate(
        targets,
        build_aggregator(replace(cfg, consolidate_passes=0), policy),
        replace(cfg, consolidate_passes=0),
        engine=None,
        pad_token_id=0,
    )
    assert (off.passes, off.steps, off.targets) == (0, 0, 1)
