"""Every bad user input: non-zero exit, ONE clear line on stderr naming problem and fix."""

import subprocess
import sys
from pathlib import Path

import pytest

from train_unified import main
from unified.cli import build_parser as train_parser
from unified.errors import UserError
from unified.eval.cli import build_parser as eval_parser

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "unknown benchmark": (["--benchmark", "nope"], "unknown benchmark 'nope'"),
    "unknown problem id": (["--problem-id", "Mbpp/99999"], "unknown problem id 'Mbpp/99999'"),
    "id from the other benchmark": (["--problem-id", "HumanEval/3"], "--benchmark humaneval"),
    "zero problems": (["--problems", "0"], "--problems must be"),
    "negative rounds": (["--rounds", "-2"], "--rounds must be"),
    "non-numeric rounds": (["--rounds", "two"], "--rounds needs a whole number"),
    "unknown override key": (["trainer.no_such_key=1"], "unknown config key 'trainer.no_such_key'"),
    "malformed override": (["trainer.rounds"], "malformed override 'trainer.rounds'"),
    "malformed override value": (["algorithm.lr=[1,"], "malformed override"),
    "unknown group option": (["rollout=warp"], "unknown rollout 'warp'"),
    "missing model path": (["model.path=/no/such/model"], "model path '/no/such/model' does not exist"),
    "unreachable model id": (["model.path=nobody/no-such-model"], "nobody/no-such-model"),
    "unwritable output dir": (["--output-dir", "/proc/unified-test"], "not writable"),
    "missing resume checkpoint": (["--resume", "/no/such/ckpt"], "no such checkpoint"),
    "zero save-every": (["--save-every", "0"], "--save-every must be a whole number >= 1"),
    "key without its group": (["rounds=1"], "did you mean trainer.rounds=1 (or --rounds 1)"),
    "a group's option as a key": (["algorithm.name=rloo"], "algorithm is a config group, chosen as algorithm=NAME (one of grpo"),
    "a group's option under another key": (["model.kind=tiny"], "model is a config group, chosen as model=NAME"),
    "value of the wrong type": (["trainer.rounds=two"], "trainer.rounds='two' is not valid"),
    "a key added with +": (["+trainer.roundz=1"], "unknown config key 'trainer.roundz'"),
    "a schema check": (["tuning.method=qlora"], "tuning.method must be one of"),
    "answer shapes on hf": (
        ["model=tiny", "rollout=hf", "pipeline.constrain=[deduction]"],
        "rollout=hf cannot decode answers in a shape",
    ),
    "a malformed mix": (["pipeline.mix=[solve]"], "mix entries are kind:share"),
    "a visible filter under agreement": (
        ["pipeline.solve_source=agreement", "pipeline.keep_passing_visible=true"],
        "keep_passing_visible=true drops the programs that fail one",
    ),
}

# Checked against this machine and the model after the config composes (the tiny model: fast).
NO_GPU_CASES = {
    "vllm rollout without a GPU": (["rollout=vllm"], "rollout=vllm needs a CUDA GPU"),
    "cuda device without a GPU": (["trainer.device=cuda"], "trainer.device=cuda but no CUDA GPU"),
    "--gpu without a GPU": (["--gpu", "0"], "trainer.gpus=0: no CUDA GPU"),
    "trainer.gpus without a GPU": (["trainer.gpus='1'"], "trainer.gpus=1: no CUDA GPU"),
}
MACHINE_CASES = {
    "context longer than the model's": (["rollout.max_model_len=4096"], "rollout.max_model_len=4096 does not fit the model"),
    "no room for the prompt": (["rollout.max_model_len=64", "rollout.max_tokens=64"], "leaves no room for the prompt"),
}


@pytest.fixture
def _clean_process_state(monkeypatch):
    """main() sets CUDA_VISIBLE_DEVICES (--gpu) and quiets the console: undo both."""
    import os
    import warnings

    saved = dict(os.environ)
    with warnings.catch_warnings():
        yield
    os.environ.clear()
    os.environ.update(saved)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and "Traceback" not in err[0], err[0]
    return err[0]


@pytest.mark.parametrize("name", list(NO_GPU_CASES) + list(MACHINE_CASES))
def test_machine_and_model_mismatch_is_caught_before_work(name, capsys, tmp_path, _clean_process_state):
    if name in NO_GPU_CASES:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    argv, expected = {**NO_GPU_CASES, **MACHINE_CASES}[name]
    out = tmp_path / "run"
    assert main(["--problems", "1", "model=tiny", "--output-dir", str(out), *argv]) == 2
    assert expected in _one_error_line(capsys)
    assert not out.exists()  # nothing was written


def test_a_folder_holding_a_run_is_refused_not_moved(capsys, tmp_path, _clean_process_state):
    out = tmp_path / "run"
    (out / "checkpoints" / "round_000002").mkdir(parents=True)
    (out / "main.log").write_text("a finished run\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["--problems", "1", "model=tiny", "--output-dir", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "--resume auto" in line and "--output-dir" in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing moved aside


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_gives_one_clear_line(name, capsys):
    argv, expected = CASES[name]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and expected in err[0], err[0]
    assert "Traceback" not in err[0]


def test_no_traceback_from_the_real_command_line():
    for argv in (["--benchmark", "nope"], ["--rounds", "x"]):
        proc = subprocess.run([sys.executable, "train_unified.py", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
        assert "Traceback" not in proc.stderr


def test_help_lists_the_flags():
    proc = subprocess.run([sys.executable, "train_unified.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for flag in (
        "--benchmark",
        "--problems",
        "--problem-id",
        "--rounds",
        "--save-every",
        "--resume",
        "--gpu",
        "--output-dir",
        "--cfg",
    ):
        assert flag in proc.stdout


def test_corrupted_resume_checkpoint_is_one_line_and_touches_nothing(tmp_path, capsys):
    bogus = tmp_path / "round_000003"
    bogus.mkdir()
    (bogus / "state.pt").write_text("not a checkpoint")
    out = tmp_path / "run"
    assert main(["--resume", str(bogus), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "incomplete or corrupted" in err[0], err
    assert not (out / "main.log").exists()  # failed before the run folder was used


@pytest.mark.parametrize("parser", ["train", "eval"])
def test_both_command_lines_parse_counts_with_one_helper(parser):
    """`errors.whole_number` is the one count parser: words and (for eval) zero are one line."""
    build = train_parser if parser == "train" else eval_parser
    assert build().parse_args(["--problems", "3"]).problems == 3
    with pytest.raises(UserError, match="--problems needs a whole number, got 'x'"):
        build().parse_args(["--problems", "x"])
    if parser == "eval":
        with pytest.raises(UserError, match="--problems must be at least 1"):
            build().parse_args(["--problems", "0"])
