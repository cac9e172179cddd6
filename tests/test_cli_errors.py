"""Every bad user input: non-zero exit, ONE clear line on stderr naming problem and fix."""

import subprocess
import sys
from pathlib import Path

import pytest

from train_unified import main

ROOT = Path(__file__).resolve().parents[1]

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
}


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
    for flag in ("--benchmark", "--problems", "--problem-id", "--rounds", "--save-every", "--resume", "--gpu", "--output-dir", "--cfg"):
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
