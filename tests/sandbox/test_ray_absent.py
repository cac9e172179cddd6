"""Where Ray is not installed (the lent GPU machine: only bench/gpu_shims' stand-in for it, on
the path for verl's import), every test that needs Ray skips with one line instead of failing
(tests/helpers/need_ray.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.e2e import REPO, env

NEED_RAY = [
    "tests/sandbox/test_executor.py::test_ray_backend_runs_batches_in_order",
    "tests/sandbox/test_ray_start.py",
    "tests/multinode/test_ray_nodes.py",
]


def test_tests_needing_ray_skip_with_the_stand_in():
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *NEED_RAY]
    out = subprocess.run(
        cmd, cwd=REPO, env={**env(), "PYTHONPATH": "bench/gpu_shims"}, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "failed" not in out.stdout and "error" not in out.stdout.lower(), out.stdout[-3000:]
    skips = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all("ray is not installed" in line for line in skips), out.stdout[-3000:]
