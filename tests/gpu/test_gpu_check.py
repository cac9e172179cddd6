"""bench/gpu_check.py (`make gpu-check`) where it can be checked without a GPU: one line
and exit 0 on a machine without CUDA, one line and exit 2 without torch or without a
package it needs (naming it and the pip line that fetches the wheels), the pins it asks
for are requirements/cpu.lock's, and its timing code on this CPU."""

import json
import runpy
import subprocess
import sys

import pytest
import torch

from tests.helpers.gpu_common import REPO, job_env

SCRIPT = REPO / "bench" / "gpu_check.py"


def _lines(proc) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_make_gpu_check_without_cuda_says_one_line_and_exits_0():
    # PY: this interpreter (make falls back to python3 where the checkout has no .venv)
    proc = subprocess.run(
        ["make", "--no-print-directory", "gpu-check", f"PY={sys.executable}"],
        cwd=REPO,
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and len(_lines(proc)) == 1, _lines(proc)
    assert _lines(proc)[0].startswith("gpu-check: no CUDA GPU visible") and "docs/gpu.md" in _lines(proc)[0]


def test_without_torch_one_line_and_exit_2():
    code = f"import sys, runpy; sys.modules['torch'] = None; sys.argv = ['gpu_check.py']; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=job_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and len(_lines(proc)) == 1, _lines(proc)
    assert "torch does not import" in _lines(proc)[0]


def test_a_missing_package_is_one_line_naming_it_and_the_wheels(monkeypatch, capsys):
    check = runpy.run_path(str(SCRIPT))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    check["NEEDED"]["no_such_module_xyz"] = "a carried wheel"
    assert check["main"](["--device", "cpu", "--no-tests"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "missing no_such_module_xyz" in out[0] and "pip download --no-deps" in out[0]


def test_the_wheels_to_carry_are_the_locked_versions():
    check = runpy.run_path(str(SCRIPT))
    lock = (REPO / "requirements" / "cpu.lock").read_text().splitlines()
    line = check["pip_download_line"]()
    for name in check["CARRY"]:
        pin = next(entry for entry in lock if entry.lower().replace("_", "-").startswith(name.lower().replace("_", "-") + "=="))
        assert pin in line, (name, pin)
    assert "ray" not in line.split() and "--python-version 3.12" in line


def test_the_timing_table_on_this_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--no-tests", "--out", str(out)],
        cwd=REPO,
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    t = report["timings"]
    assert t["generation_hf"]["tokens"] > 0 and t["generation_hf"]["tokens_per_s"] > 0
    assert t["update"]["steps"] >= 1 and t["update"]["tokens_per_s"] > 0
    assert t["push_hf"]["bytes"] > 10**6 and t["push_hf"]["push_s"] > 0 and t["push_hf"]["push_over_copy"] > 0
    assert "push / copy" in proc.stdout and "tests" not in report
