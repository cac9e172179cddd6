"""The GPU tests exist and skip cleanly here: `pytest -m gpu` collects every test under
tests/gpu marked `gpu` and, without CUDA, skips each with the one-line reason."""

import subprocess
import sys

import pytest
import torch

from tests.helpers.gpu_common import GPU_TESTS, REPO, job_env

EXPECTED = {"test_gpu_engine.py", "test_gpu_update.py", "test_gpu_fsdp.py", "test_gpu_run.py", "test_gpu_sleep.py"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skips of a machine without CUDA")
def test_pytest_m_gpu_collects_the_gpu_tests_and_skips_each_without_cuda():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-rs", "-q", "-p", "no:cacheprovider", str(GPU_TESTS)],
        cwd=REPO,
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    skips = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert {line.split("tests/gpu/")[1].split(":")[0] for line in skips} == EXPECTED, proc.stdout[-3000:]
    assert all(line.endswith(("needs a CUDA GPU", "needs two CUDA GPUs")) for line in skips), skips
    assert " passed" not in proc.stdout.splitlines()[-1] and " skipped" in proc.stdout.splitlines()[-1]
