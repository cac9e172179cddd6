"""Several Ray nodes on this machine, on loopback: Ray's own multi-node test harness
(`ray.cluster_utils.Cluster`: a head plus worker nodes, each its own raylet and object
store), with the driver (this process) connected to it. Used by tests/multinode and
bench/node_loss.py.

A node starts whatever the machine's load: it is added inside `ray_session.patient_start()`, the
executor's own start (its agents on loopback ports chosen there, Ray's start-up waits raised to
`STARTUP_S`, a hang guard), and the harness's own waits for it are `STARTUP_S` too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from unified.sandbox import ray_session

CHUNK_TITLE = "ray::run_chunk"  # the process title of a Ray worker while it runs a sandbox chunk
STARTUP_S = ray_session.STARTUP_S  # a hang guard only: how long a node may take to start


def add_node(c, cpus: int = 2):
    """A node with `cpus` CPUs added to the cluster `c`, once it is alive (waits `STARTUP_S` at most)."""
    with ray_session.patient_start():
        head = {"include_dashboard": False} if c.head_node is None else {}  # the first node is the head
        node = c.add_node(wait=False, num_cpus=cpus, **head)
        c._wait_for_node(node, timeout=STARTUP_S)  # the harness's own wait, with its 30 s raised
        c.wait_for_nodes(timeout=STARTUP_S)
    return node


@contextlib.contextmanager
def cluster(nodes: int = 2, cpus: int = 2):
    """-> (the Cluster, [its nodes, head first]); the driver is connected while the block runs."""
    import ray
    from ray.cluster_utils import Cluster

    with ray_session.loopback():
        c = Cluster(initialize_head=False)
        try:
            added = [add_node(c, cpus) for _ in range(nodes)]
            with ray_session.patient_start():
                ray.init(address=c.address, log_to_driver=False)
            yield c, added
        finally:
            ray.shutdown()
            c.shutdown()


def node_pids(node) -> set[int]:
    """Every process of a node: its own (raylet, agents, ...) and the Ray workers under them."""
    pids = set()
    for infos in node.all_processes.values():
        for info in infos:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc = psutil.Process(info.process.pid)
                pids |= {proc.pid, *(p.pid for p in proc.children(recursive=True))}
    return pids


def running_chunks(node) -> list[psutil.Process]:
    """The Ray workers of `node` in the middle of a sandbox chunk."""
    out = []
    for pid in node_pids(node):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if _in_chunk(proc):
                out.append(proc)
    return out


def _in_chunk(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.cmdline()[:1] != [] and proc.cmdline()[0].startswith(CHUNK_TITLE)
    return False


def hold_chunks(nodes, enough, done) -> list[tuple[object, psutil.Process]]:
    """Stop (SIGSTOP) every Ray worker seen running a chunk on `nodes` until `enough(held)` says
    so; -> the held (node, worker) pairs, still stopped (`release` them). A held worker cannot
    finish its chunk, so the chunk stays mid-run on its node and that worker takes no other
    chunk (Ray reuses a worker whose task is done): whatever the machine's load, the next chunks
    go where Ray places them. Stops early, holding what it has, if `done()` (the batch ended) or
    after STARTUP_S (a hang guard)."""
    held: list[tuple[object, psutil.Process]] = []
    deadline = time.monotonic() + STARTUP_S
    while not enough(held) and not done() and time.monotonic() < deadline:
        for node in nodes:
            for proc in running_chunks(node):
                if any(proc.pid == p.pid for _, p in held):
                    continue
                proc.send_signal(signal.SIGSTOP)
                if _in_chunk(proc):  # stopped inside the chunk: it has not replied
                    held.append((node, proc))
                else:  # it finished between the look and the stop
                    proc.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    return held


def release(held) -> None:
    for _, proc in held:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGCONT)


def lose_node(c, node, held) -> None:
    """The node dies: Ray's harness kills its raylet and services, then its held workers go with
    them (a stopped process cannot notice its raylet is gone)."""
    c.remove_node(node, allow_graceful=False)
    for _, proc in held:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


def settled(cpus: int) -> None:
    """Wait until Ray sees `cpus` CPUs in the cluster, none taken: a batch is then placed on idle
    nodes, the new ones included (STARTUP_S at most: a hang guard)."""
    import ray

    deadline = time.monotonic() + STARTUP_S
    while not ray.cluster_resources().get("CPU", 0) == ray.available_resources().get("CPU", 0) == cpus:
        assert time.monotonic() < deadline, f"Ray does not see {cpus} idle CPUs: {ray.available_resources()}"
        time.sleep(0.1)
