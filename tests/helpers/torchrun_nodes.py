"""Two torchrun agents ("nodes") on this machine, one trainer each, meeting by c10d rendezvous
on 127.0.0.1 (tests/multinode/test_torchrun_nodes.py). Each round's
rendezvous gets a store of its own (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: the trainer refuses a
restartable launch without it, unified/trainer/distributed.py says why)."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.helpers.e2e import FAST, REPO, busy_cores, env, final_weights, metrics_rows

RUN = ["--rounds", "3", "--resume", "auto", "trainer.deterministic=true"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out_dir: Path) -> list[subprocess.Popen]:
    """Two torchrun agents, one trainer each, meeting at a rendezvous on loopback."""
    agent_env = {**env(), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "GLOO_SOCKET_IFNAME": "lo"}
    port, agents = _free_port(), []
    for node in (0, 1):
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes=2",
            "--nproc_per_node=1",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}",
            f"--rdzv_id={out_dir.name}",
            "--local_addr=127.0.0.1",
            "--max_restarts=1",
            "--monitor_interval=1",
            str(REPO / "train_unified.py"),
            f"--output-dir={out_dir}",
            *FAST,
            *RUN,
        ]
        log = out_dir.parent / f"{out_dir.name}.node{node}"
        with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:  # the agent keeps its own copies
            agents.append(subprocess.Popen(cmd, cwd=REPO, env=agent_env, stdout=out, stderr=err))
    return agents


def finish(out_dir: Path, agents: list[subprocess.Popen]) -> str:
    """Wait for both agents; -> both agents' stdout (what the trainers printed)."""
    codes = [a.wait(timeout=1800) for a in agents]  # a hang guard only
    logs = {n: (out_dir.parent / f"{out_dir.name}.node{n}.err").read_text()[-4000:] for n in (0, 1)}
    assert codes == [0, 0], f"agents exited {codes}:\n{logs}"
    return "".join((out_dir.parent / f"{out_dir.name}.node{n}.out").read_text() for n in (0, 1))


def stop(agents: list[subprocess.Popen]) -> None:
    """End agents still running (a failed test): SIGTERM, which an agent passes on to its
    trainers, then SIGKILL if it does not end."""
    for agent in agents:
        if agent.poll() is None:
            agent.terminate()
    for agent in agents:
        try:
            agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()


def trainer_of_rank(agents: list[subprocess.Popen], rank: str) -> psutil.Process:
    for agent in agents:
        for child in psutil.Process(agent.pid).children():
            if child.environ().get("RANK") == rank:
                return child
    raise AssertionError(f"no trainer of rank {rank}")


def kill_after_first_checkpoint(out_dir: Path, agents: list[subprocess.Popen]) -> None:
    latest = out_dir / "checkpoints" / "latest"
    while not (latest.exists() and latest.read_text().strip() == "round_000001"):
        assert all(a.poll() is None for a in agents), "an agent ended before round 1's checkpoint"
        time.sleep(0.2)
    trainer_of_rank(agents, "1").send_signal(signal.SIGKILL)
    assert not (out_dir / "checkpoints" / "round_000003").exists()  # the kill came before the run's end


def side_by_side(root: Path, busy: int = 0) -> tuple[Path, Path]:
    """Two undisturbed two-agent runs started together, with `busy` CPU-burning processes
    alongside (ended by pid); -> their output folders, both finished."""
    first, second = root / "first", root / "second"
    with busy_cores(busy) if busy else contextlib.nullcontext():
        a, b = launch(first), launch(second)
        try:
            finish(first, a)
            finish(second, b)
        finally:
            stop(a + b)
    return first, second


def differences(a: Path, b: Path) -> dict:
    """What two finished runs of one config differ in, bit for bit: the final weights' tensors
    (their names) and each round's `train/` and `weights/` metrics (round, key, both values);
    empty lists when they are identical."""
    wa, wb = final_weights(a), final_weights(b)
    tensors = sorted(k for k in wa.keys() | wb.keys() if k not in wa or k not in wb or not wa[k].equal(wb[k]))
    metrics = []
    for ra, rb in zip(metrics_rows(a), metrics_rows(b), strict=True):
        for key in sorted(k for k in ra.keys() | rb.keys() if k.startswith(("train/", "weights/"))):
            if ra.get(key) != rb.get(key):
                metrics.append((ra["round"], key, ra.get(key), rb.get(key)))
    return {"tensors": tensors, "metrics": metrics}
