"""Several Ray nodes on this machine, on loopback: Ray's own multi-node test harness
(`ray.cluster_utils.Cluster`: a head plus worker nodes, each its own raylet and object
store), with the driver (this process) connected to it. Used by tests/multinode and
bench/node_loss.py.

A node starts whatever the machine's load: Ray's start-up waits that would fail a slow start
are taken out of its path or made a generous hang guard (`STARTUP_S`):
- the raylet waits a fixed ~15 s (not configurable) for its agents to write their port files
  (`Timed out waiting for file .../metrics_agent_port_...`, then the raylet aborts): every node's
  agents are given free loopback ports (`_agent_ports`), which the raylet then does not wait
  for, except the dashboard agent's listen port (the raylet has no flag for it), whose file is
  written before the raylet starts (`_listen_port_written`);
- the GCS port wait, the harness's node waits and this process's wait for a raylet to register
  (30 s, fixed in `ray._private.node`: its look-ups are retried here) are `STARTUP_S`, and so are
  the raylet's waits for its agents and Ray workers to register (RAY_* settings read at start).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from unittest import mock

import psutil

from unified.sandbox import ray_session

CHUNK_TITLE = "ray::run_chunk"  # the process title of a Ray worker while it runs a sandbox chunk
STARTUP_S = 600  # a hang guard only: how long a node may take to start
SLOW_START = {  # Ray's start-up waits, raised to the hang guard (read when a node starts)
    "RAY_gcs_server_port_wait_time_s": str(STARTUP_S),
    "RAY_agent_register_timeout_ms": str(STARTUP_S * 1000),
    "RAY_worker_register_timeout_seconds": str(STARTUP_S),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent_ports() -> dict[str, int]:
    """Ports for a node's agents, chosen here: a raylet told them does not wait for the agents'
    port files (the wait that aborts a raylet on a loaded machine)."""
    names = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port", "runtime_env_agent_port")
    return {name: _free_port() for name in names}


def add_node(c, cpus: int = 2):
    """A node with `cpus` CPUs added to the cluster `c`, once it is alive (waits `STARTUP_S` at most)."""
    with _slow_start(), _listen_port_written():
        head = {"include_dashboard": False} if c.head_node is None else {}  # the first node is the head
        node = c.add_node(wait=False, num_cpus=cpus, **head, **_agent_ports())
        c._wait_for_node(node, timeout=STARTUP_S)  # the harness's own wait, with its 30 s raised
        c.wait_for_nodes(timeout=STARTUP_S)
    return node


@contextlib.contextmanager
def _listen_port_written():
    """Inside the block a node writes its dashboard agent's listen-port file (the port the agent is
    told) before starting its raylet, so the raylet finds it at once instead of waiting for it."""
    from ray._private.node import Node
    from ray._raylet import DASHBOARD_AGENT_LISTEN_PORT_NAME, persist_port

    start = Node.start_raylet

    def start_raylet(node, *args, **kwargs):
        persist_port(
            node._session_dir, node._node_id, DASHBOARD_AGENT_LISTEN_PORT_NAME, node._ray_params.dashboard_agent_listen_port
        )
        return start(node, *args, **kwargs)

    with mock.patch.object(Node, "start_raylet", start_raylet):
        yield


@contextlib.contextmanager
def _slow_start():
    """Inside the block Ray's start-up waits are `STARTUP_S`: its RAY_* settings, and the look-up
    of a starting node in the GCS, retried until the node is there."""
    from ray._private import services

    get_node = services.get_node

    def patient_get_node(*args, **kwargs):
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                return get_node(*args, **kwargs)
            except RuntimeError:  # not registered yet (or the GCS slow to answer)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    saved = {k: os.environ.get(k) for k in SLOW_START}
    os.environ.update(SLOW_START)
    try:
        with mock.patch.object(services, "get_node", patient_get_node):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def cluster(nodes: int = 2, cpus: int = 2):
    """-> (the Cluster, [its nodes, head first]); the driver is connected while the block runs."""
    import ray
    from ray.cluster_utils import Cluster

    with ray_session.loopback():
        c = Cluster(initialize_head=False)
        try:
            added = [add_node(c, cpus) for _ in range(nodes)]
            with _slow_start():
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
