"""Per-lever attribution of a discovery run (`experiments.levers`), on a run folder written
here: which problems the first n samples found, which only the budget found, which replay
could keep, and how each greedy gain got its signal."""

import json

import pandas as pd

from unified.eval.experiments.levers import levers, passing_indices


def programs(rows):
    return pd.DataFrame([{"problem_id": p, "program_id": f"{p}#p{i}", "code": c, "rejection": r} for p, i, c, r in rows])


def write_round(run, k, rows, samples, drawn):
    folder = run / f"round_{k}"
    folder.mkdir(parents=True)
    programs(rows).to_parquet(folder / "programs.parquet")
    pd.DataFrame({"problem_id": [f"x{i}" for i in range(drawn)]}).to_parquet(folder / "problems.parquet")
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"round": k, "tasks/samples_phase_1": samples}) + "\n")


def test_a_duplicate_of_a_passing_program_passes_and_a_duplicate_of_a_failing_one_does_not():
    rows = programs(
        [
            ("a", 0, "good", None),
            ("a", 5, "good", "duplicate"),
            ("a", 1, "bad", "fails_visible"),
            ("a", 6, "bad", "duplicate"),
            ("b", 2, "bad", "fails_visible"),
        ]
    )
    assert passing_indices(rows) == {"a": {0, 5}}


def test_each_gain_is_classed_by_how_its_signal_came(tmp_path):
    run = tmp_path / "seed0" / "run"
    # round 1: every problem gets 8 samples (n=2); a passes at sample 1, b only at sample 6
    write_round(run, 1, [("a", 1, "A", None), ("b", 6, "B", None), ("c", 0, "C", "fails_visible")], samples=24, drawn=3)
    # round 2: a is found again among its 2; b (found before) has no fresh pass: replay keeps it
    write_round(run, 2, [("a", 0, "A", None), ("b", 0, "x", "fails_visible"), ("c", 7, "C", None)], samples=12, drawn=3)
    result = {
        "per_problem_before": {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 1.0},
        "noisy_problems": ["e"],
        "seeds": [{"seed": 0, "per_problem_after": {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0, "e": 0.0}}],
    }
    s = levers(result, tmp_path, n=2)["seeds"]["0"]
    assert [(r["found"], r["found_in_first_n"], r["found_beyond_n"]) for r in s["rounds"]] == [(2, 1, 1), (2, 1, 1)]
    assert [r["replay_eligible"] for r in s["rounds"]] == [[], ["b"]]
    assert [r["samples_beyond_n"] for r in s["rounds"]] == [18, 6]
    assert s["found_only_by_budget"] == ["b", "c"] and s["found_any_round"] == 3
    assert s["gained"] == {"a": "first_n", "b": "budget", "d": "none"}  # e is noisy: left out
    assert s["gained_replay_eligible"] == ["b"] and s["lost"] == [] and s["found_not_gained"] == 1  # c
