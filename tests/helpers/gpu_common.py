"""What the tests under tests/gpu share: the device parameters, one-line skips for what a
bare GPU machine may lack, and running a job of gpu_jobs.py in a fresh process.

Each job runs in its own process: the first `init_distributed` decides the process
group's backend (NCCL for cuda, gloo for cpu) and a process holds one engine, so jobs on
different devices cannot share the pytest process.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HELPERS = Path(__file__).resolve().parent
TESTS = HELPERS.parent
GPU_TESTS = TESTS / "gpu"
REPO = TESTS.parent

# the CPU twin runs everywhere (CI); the cuda case is marked `gpu` (skipped without CUDA)
CPU = pytest.param("cpu", id="cpu")
CUDA = pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)
# CPU twins too slow for every test run (minutes on 2 cores): only with UNIFIED_CPU_TWINS=1
SLOW_CPU = [pytest.param("cpu", id="cpu", marks=pytest.mark.slow)] if os.environ.get("UNIFIED_CPU_TWINS") == "1" else []


def require(module: str) -> None:
    """Skip with one line when the third-party `module` is not installed (a GPU machine
    without the wheels docs/gpu.md lists); a broken import of the project itself fails."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "unified":
            raise
        pytest.skip(f"needs {module} ({exc}); docs/gpu.md lists the wheels to carry")


def gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def job_env() -> dict:
    """This environment without a rendezvous (this process may hold a world of one), with
    the repository importable."""
    from tests.helpers.e2e import env

    e = env()
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), e.get("PYTHONPATH", "")) if p)
    e.setdefault("TOKENIZERS_PARALLELISM", "false")
    return e


def run_job(out: Path, job: str, *args: str, ranks: int = 0, timeout: float = 600) -> dict:
    """`gpu_jobs.py JOB OUT ARGS` in a fresh process (under torchrun with `ranks` > 0);
    -> what rank 0 saved."""
    script = [str(HELPERS / "gpu_jobs.py"), job, str(out), *args]
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"] if ranks else []
    proc = subprocess.run(
        [sys.executable, *launcher, *script], cwd=REPO, env=job_env(), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{job} failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return torch.load(out / "rank0.pt", weights_only=False)
