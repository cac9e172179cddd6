"""Several Ray nodes on this machine, on loopback: Ray's own multi-node test harness
(`ray.cluster_utils.Cluster`: a head plus worker nodes, each its own raylet and object
store), with the driver (this process) connected to it. Used by tests/multinode."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from unified.sandbox import ray_session

CHUNK_TITLE = "ray::run_chunk"  # the process title of a Ray worker while it runs a sandbox chunk


@contextlib.contextmanager
def cluster(nodes: int = 2, cpus: int = 2):
    """-> (the Cluster, [its nodes, head first]); the driver is connected while the block runs."""
    import ray
    from ray.cluster_utils import Cluster

    with ray_session.loopback():
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})
        try:
            added = [c.add_node(num_cpus=cpus) for _ in range(nodes - 1)]
            c.wait_for_nodes()
            ray.init(address=c.address, log_to_driver=False)
            yield c, [c.head_node, *added]
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


def running_chunk(node) -> psutil.Process | None:
    """A Ray worker of `node` in the middle of a sandbox chunk, or None."""
    for pid in node_pids(node):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.cmdline()[:1] and proc.cmdline()[0].startswith(CHUNK_TITLE):
                return proc
    return None


def freeze_a_chunk(node, done) -> psutil.Process | None:
    """Stop (SIGSTOP) a Ray worker of `node` while it runs a chunk: its calls cannot finish, so
    the chunk is mid-run whatever the machine's load. None if `done()` came first (the batch
    ended without a chunk there)."""
    while not done():
        proc = running_chunk(node)
        if proc is not None:
            proc.send_signal(signal.SIGSTOP)
            if proc.cmdline()[:1] and proc.cmdline()[0].startswith(CHUNK_TITLE):
                return proc  # stopped inside the chunk: it has not replied
            proc.send_signal(signal.SIGCONT)  # it finished between the look and the stop
        time.sleep(0.02)
    return None


def lose_node(c, node, frozen: psutil.Process) -> None:
    """The node dies: Ray's harness kills its raylet and services, then the frozen worker goes
    with them (a stopped process cannot notice its raylet is gone)."""
    c.remove_node(node, allow_graceful=False)
    with contextlib.suppress(ProcessLookupError):
        os.kill(frozen.pid, signal.SIGKILL)
