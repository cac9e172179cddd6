"""The tune/report/confirm splits never change for a benchmark and seed: committed results
name their problems by them. A changed shuffle, seed, cut or filter fails the pinned digests."""

import hashlib
import json
from pathlib import Path

import pytest

from unified.benchmarks.mbpp import REMOVED_IN_V02
from unified.benchmarks.splits import ordered, split_ids
from unified.errors import UserError

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

# sha256 of the JSON list of ids, first 16 hex digits (computed from unified/eval/experiments/gain.py's split, 2026-11-28)
PINNED = {
    ("mbpp", "tune"): (92, "472a3ceac362b8c0"),  # the first 100 of the order less 8 removed tasks
    ("mbpp", "report"): (192, "0ef008cd7409042e"),  # the next 200 less 8
    ("mbpp", "confirm"): (94, "fc2f4fdb6f906773"),  # the last 99 less 5: no decision saw them
    ("humaneval", "report"): (164, "f3859741c22c187b"),
    ("humaneval", "no_example"): (48, "aaffd1d6d0d16a0c"),
}


def digest(ids: list[str]) -> str:
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


@pytest.mark.parametrize("benchmark,split", sorted(PINNED))
def test_the_split_is_pinned(benchmark, split):
    ids = split_ids(split, benchmark)
    assert (len(ids), digest(ids)) == PINNED[benchmark, split]


def test_the_splits_are_disjoint_and_cover_mbpp_less_the_removed_tasks():
    tune, report, confirm = split_ids("tune"), split_ids("report"), split_ids("confirm")
    assert not set(tune) & set(report) and not set(confirm) & (set(tune) | set(report))
    assert len(set(tune) | set(report) | set(confirm)) == 399 - 21 and not set(tune + report + confirm) & REMOVED_IN_V02


def test_the_removed_tasks_are_evalplus_v02s_21_and_filtered_after_the_order():
    """EvalPlus v0.2 (378 tasks) removed these 21 from v0.1 (399, bundled); the filter comes
    after the seeded order, so the unfiltered lists are the ones results took their first N from."""
    assert sorted(int(i.split("/")[1]) for i in REMOVED_IN_V02) == [
        83,
        115,
        117,
        143,
        164,
        229,
        249,
        295,
        396,
        400,
        407,
        431,
        438,
        442,
        461,
        574,
        582,
        595,
        640,
        746,
        783,
    ]
    for split in ("tune", "report", "confirm"):
        full = split_ids(split, keep_removed=True)
        assert split_ids(split) == [i for i in full if i not in REMOVED_IN_V02]
    # the report split before confirm was cut from it: its first 200 positions, then confirm's 99
    old_report = split_ids("report", keep_removed=True) + split_ids("confirm", keep_removed=True)
    assert (len(old_report), digest(old_report)) == (299, "3b9fe65763044ec3")
    assert digest(split_ids("tune", keep_removed=True)) == "05e4865dcb584bab"


def test_committed_results_use_the_split():
    """The earlier headline results' problems are the unfiltered report split's first 100."""
    result = json.loads((RESULTS / "test_time_gain_mix.json").read_text())
    assert result["problems"] == split_ids("report", keep_removed=True)[:100]


def test_another_seed_is_another_order_and_bad_names_are_one_line():
    ids = [f"Mbpp/{i}" for i in range(200)]
    assert ordered("tune", ids, seed=1) != ordered("tune", ids, seed=0)
    assert ordered("report", ids, "humaneval") == ids
    with pytest.raises(UserError, match="unknown split"):
        split_ids("validation")
    with pytest.raises(UserError, match="humaneval"):
        split_ids("no_example", "mbpp")
