"""bench/learning_gain.py --collect on hand-made run folders: every flip keeps its failure
class before and after, the gain splits into format and logic fixes (issue 35's keys), and a
problem whose control differs between repeats is left out as noise."""

import json
import sys
from argparse import Namespace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import learning_gain  # noqa: E402

IDS = ["p1", "p2", "p3", "p4", "p5"]
CONTROL = {"p1": 0.0, "p2": 0.0, "p3": 1.0, "p4": 0.0, "p5": 0.0}
CONTROL_CLASS = {"p1": "syntax", "p2": "wrong_answer", "p3": "pass", "p4": "exception", "p5": "wrong_answer"}


def _eval(folder: Path, per_problem: dict, classes: dict) -> None:
    folder.mkdir(parents=True)
    body = {"complete": True, "pass@1": sum(per_problem.values()) / len(per_problem), "per_problem": per_problem,
            "per_problem_class": classes, "pass_at_k": {"1": 0.1, "16": 0.3}}  # fmt: skip
    (folder / "eval_results.json").write_text(json.dumps(body))
    (folder / "samples.jsonl").write_text("".join(json.dumps({"task_id": i, "correct": 0}) + "\n" for i in per_problem))


def test_collect_reports_each_flips_class_and_the_net_format_logic_split(tmp_path):
    _eval(tmp_path / "before", CONTROL, CONTROL_CLASS)
    _eval(tmp_path / "control_2", {**CONTROL, "p5": 1.0}, {**CONTROL_CLASS, "p5": "pass"})  # p5 flickers: noise
    # seed 0 fixes a syntax error (format) and a wrong answer (logic), loses p3 to an exception, and "gains" p5
    _eval(tmp_path / "seed0" / "after", {"p1": 1.0, "p2": 1.0, "p3": 0.0, "p4": 0.0, "p5": 1.0},
          {"p1": "pass", "p2": "pass", "p3": "exception", "p4": "exception", "p5": "pass"})  # fmt: skip
    (tmp_path / "seed0" / "run").mkdir()
    (tmp_path / "seed0" / "run" / "metrics.jsonl").write_text(json.dumps({"round": 1, "reward/mean": 0.2}) + "\n")
    args = Namespace(seeds=[0], control_repeats=2, benchmark="mbpp", rounds=1, weights=str(tmp_path / "w"), model="tiny",
                     split="tune", offset=0, n=16, temperature=1.0, parallel=False)  # fmt: skip
    out = learning_gain.collect(args, IDS, tmp_path, [])
    assert out["noisy_problems"] == ["p5"]
    (seed,) = out["seeds"]
    flips = seed["flip_classes"]
    assert [f["problem"] for f in flips["gained"]] == ["p1", "p2"]  # the counted flips (not noisy p5), classes attached
    assert flips["lost"] == [{"problem": "p3", "before": "pass", "after": "exception"}]
    assert (flips["net_format"], flips["net_logic"]) == (1, 0)  # p1 format; p2 logic minus p3's exception
    assert out["gain_split"] == {"format": 1.0, "logic": 0.0}
    assert out["pass_at_k_before"]["16"] == 0.3 and seed["pass_at_k_after"]["16"] == 0.3
    assert out["flips_gained"] == 2 and out["flips_lost"] == 1  # p5 left out of the statistics
