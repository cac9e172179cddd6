"""The world-of-one process group: no port race, and a child process never reuses its parent's port."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = "import os; from unified.trainer.distributed import init_distributed as i; print(i('cpu').world_size, os.environ['MASTER_PORT'])"

PARENT = f"""
import os, subprocess, sys
import torch.distributed as dist
from unified.trainer.distributed import all_gather, init_distributed
init_distributed("cpu")
assert all_gather(("rank", 0)) == [("rank", 0)]
first = os.environ["MASTER_PORT"]
child = subprocess.run([sys.executable, "-c", {CHILD!r}], capture_output=True, text=True)
assert child.returncode == 0, child.stderr[-2000:]
size, port = child.stdout.split()
assert size == "1" and port != first, (size, port, first)
dist.destroy_process_group()
assert init_distributed("cpu").world_size == 1  # a second world of one in the same process
print("ok")
"""


def test_a_child_of_a_world_of_one_makes_its_own_group():
    # the parent's store still holds its port: a child that reused MASTER_PORT would fail with EADDRINUSE
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    proc = subprocess.run([sys.executable, "-c", PARENT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_all_gather_without_a_process_group_is_this_rank_alone():
    from unified.trainer.distributed import all_gather

    assert all_gather(("x", 1)) == [("x", 1)]


def test_a_torchrun_restart_that_would_hang_is_refused(monkeypatch):
    """torchrun's shared store keeps the killed workers' keys: a restart there would hang, so a
    launch that may restart is refused in one line, unless each round gets its own store."""
    import pytest

    from unified.errors import UserError
    from unified.trainer.distributed import check_restartable

    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "1")
    with pytest.raises(UserError, match="TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"):
        check_restartable()
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "0")  # no restart: the shared store is fine
    check_restartable()
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "1")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")  # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 at torchrun
    check_restartable()
