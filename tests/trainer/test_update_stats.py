"""The one token-weighted mean, and merging a round's update records (pure)."""

import math

from unified.run.metrics import train_metrics
from unified.trainer.update_stats import UpdateStats, merge_chunks, token_weighted_mean


def test_token_weighted_mean_weights_by_tokens_and_skips_what_cannot_count():
    assert token_weighted_mean([(1.0, 3), (5.0, 1)]) == 2.0  # not the plain mean 3.0
    assert token_weighted_mean([(1.0, 2), (math.nan, 5), (9.0, 0)]) == 1.0
    assert math.isnan(token_weighted_mean([]))


def test_chunks_merge_into_one_record():
    a = UpdateStats(
        steps=1,
        micro_batches=2,
        tokens=30,
        samples=8,
        used=8,
        push_s=0.5,
        grad_norm=2.0,
        versions=(1,),
        version=1,
        losses={"loss": 1.0, "pg_loss": 0.5},
    )
    b = UpdateStats(
        steps=2,
        micro_batches=1,
        tokens=10,
        samples=4,
        used=3,
        dropped_stale=1,
        push_s=0.25,
        grad_norm=6.0,
        versions=(2, 3),
        version=3,
        losses={"loss": 5.0},
    )
    m = merge_chunks([a, b])
    assert (m.steps, m.micro_batches, m.tokens, m.samples, m.used, m.dropped_stale) == (3, 3, 40, 12, 11, 1)
    assert m.versions == (1, 2, 3) and m.version == 3 and m.push_s == 0.75
    assert m.losses == {"loss": 2.0, "pg_loss": 0.5} and m.grad_norm == 3.0  # (1*30 + 5*10) / 40; (2*30 + 6*10) / 40
    assert merge_chunks([]) == UpdateStats()


def test_ranks_merge_into_metric_names():
    ranks = [
        UpdateStats(steps=2, tokens=30, samples=4, micro_batches=1, grad_norm=1.5, losses={"loss": 1.0, "pg_clipfrac": 0.1}),
        UpdateStats(steps=2, tokens=10, samples=2, micro_batches=1, grad_norm=1.5, losses={"loss": 3.0, "pg_clipfrac": 0.5}),
        UpdateStats(),  # a rank with no tasks
    ]
    m = train_metrics(ranks)
    assert m["losses/total"] == 1.5 and m["train/clip_frac"] == 0.2 and m["train/grad_norm"] == 1.5
    assert m["train/steps"] == 2 and m["train/samples"] == 6 and m["train/tokens"] == 40
    assert train_metrics([UpdateStats()]) == {}
