"""The tune/report split never changes for a benchmark and seed: committed results name
their problems by it. A changed shuffle, seed or cut fails the pinned digests."""

import hashlib
import json
from pathlib import Path

import pytest

from unified.benchmarks.splits import ordered, split_ids
from unified.errors import UserError

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

# sha256 of the JSON list of ids, first 16 hex digits (computed from unified/eval/experiments/gain.py's split, 2026-11-28)
PINNED = {
    ("mbpp", "tune"): (100, "05e4865dcb584bab"),
    ("mbpp", "report"): (299, "3b9fe65763044ec3"),
    ("humaneval", "report"): (164, "f3859741c22c187b"),
    ("humaneval", "no_example"): (48, "aaffd1d6d0d16a0c"),
}


def digest(ids: list[str]) -> str:
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


@pytest.mark.parametrize("benchmark,split", sorted(PINNED))
def test_the_split_is_pinned(benchmark, split):
    ids = split_ids(split, benchmark)
    assert (len(ids), digest(ids)) == PINNED[benchmark, split]


def test_tune_and_report_are_disjoint_and_cover_mbpp():
    tune, report = split_ids("tune"), split_ids("report")
    assert not set(tune) & set(report) and len(set(tune) | set(report)) == 399


def test_committed_results_use_the_split():
    """The headline result's problems are the report split's first 100."""
    result = json.loads((RESULTS / "test_time_gain_mix.json").read_text())
    assert result["problems"] == split_ids("report")[:100]


def test_another_seed_is_another_order_and_bad_names_are_one_line():
    ids = [f"Mbpp/{i}" for i in range(200)]
    assert ordered("tune", ids, seed=1) != ordered("tune", ids, seed=0)
    assert ordered("report", ids, "humaneval") == ids
    with pytest.raises(UserError, match="unknown split"):
        split_ids("validation")
    with pytest.raises(UserError, match="humaneval"):
        split_ids("no_example", "mbpp")
