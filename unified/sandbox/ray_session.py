"""Which Ray instance the `ray` executor runs on, and how that cluster's nodes are named.

- `executor.ray_address: null` (the default): the run starts its OWN local Ray instance
  (`ray.init(address="local")`), listening on loopback only: Ray has no per-call
  authentication and a local instance needs no other address. A Ray session that another
  process left on the machine (a running instance, its `ray_current_cluster` file, one that
  was killed) is never joined, so it cannot break the run.
- `auto` (Ray's own discovery: `RAY_ADDRESS`, then the machine's running instance) or
  `host:port` (a cluster's GCS): joins that cluster on purpose.
- A process that called `ray.init` itself (a driver script, a test harness) keeps its
  connection: the executor neither starts nor stops it.

A start survives a loaded machine (`patient_start`; the run's own instance and the test
harness's nodes alike). Ray's start-up has fixed waits that a busy machine exceeds: the raylet
waits ~15 s (not configurable) for its agents to write their port files and then aborts
(`Timed out waiting for file .../metrics_agent_port_...`), and `ray._private.node` waits 30 s
for the raylet to register. Inside the block every node's agents get free loopback ports
chosen here (a raylet told a port does not wait for its file), the dashboard agent's
listen-port file is written before the raylet starts (the raylet has no flag for that port),
the registration look-up is retried, and every other start-up wait (the GCS port, the raylet's
waits for agents and Ray workers to register) is raised to `STARTUP_S`, a hang guard.

Nodes are numbered once, when first seen: the head 0, then the others in Ray's node-table
order (by node id), a dead node keeping its number; drivers that connect to one cluster at
the same time (every torchrun rank) give a node the same number.
"""

from __future__ import annotations

import os
import socket
import time
from contextlib import ExitStack, contextmanager
from unittest import mock

# Ray takes a node's address from the route to the outside unless "cluster mode" is off, in
# which case it is 127.0.0.1 (ray._private.services.get_node_ip_address); the switch is read
# from the environment when ray is imported, and by every process that the instance starts.
CLUSTER_MODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
STARTUP_S = 600  # a hang guard only: how long a node may take to start
SLOW_START = {  # Ray's start-up waits, raised to the hang guard (read when a node starts)
    "RAY_gcs_server_port_wait_time_s": str(STARTUP_S),
    "RAY_agent_register_timeout_ms": str(STARTUP_S * 1000),
    "RAY_worker_register_timeout_seconds": str(STARTUP_S),
}
AGENT_PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port", "runtime_env_agent_port")


@contextmanager
def loopback():
    """Inside the block, a Ray instance started here (or a node a test harness adds) listens on
    127.0.0.1 only; the environment and Ray's switch are put back afterwards."""
    from ray._private import ray_constants

    saved_env, saved_mode = os.environ.get(CLUSTER_MODE_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[CLUSTER_MODE_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_mode
        if saved_env is None:
            os.environ.pop(CLUSTER_MODE_ENV, None)
        else:
            os.environ[CLUSTER_MODE_ENV] = saved_env


def connect(address: str | None) -> bool:
    """Connect this process to the Ray instance `address` names (see the module docstring);
    -> True when this call connected (so `ray.shutdown()` is this process's to call)."""
    import ray

    if ray.is_initialized():
        return False
    if address is None:
        with loopback(), patient_start():
            ray.init(address="local", include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return True


@contextmanager
def patient_start():
    """Inside the block a Ray node started in this process (`ray.init`'s own instance, a test
    harness's `Cluster.add_node`) starts whatever the machine's load (see the module docstring)."""
    with ExitStack() as stack:
        for step in (_environment(SLOW_START), _agents_on_chosen_ports(), _listen_port_written(), _node_lookup_retried()):
            stack.enter_context(step)
        yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _agents_on_chosen_ports():
    """Every node's parameters (`RayParams`, as `ray.init` and the harness build them) with a
    free port for each agent the caller left unset."""
    from ray._private import parameter

    class ChosenPorts(parameter.RayParams):
        def __init__(self, *args, **kwargs):
            for name in AGENT_PORTS:
                if kwargs.get(name) is None:
                    kwargs[name] = _free_port()
            super().__init__(*args, **kwargs)

    with mock.patch.object(parameter, "RayParams", ChosenPorts):
        yield


@contextmanager
def _listen_port_written():
    """A starting node writes its dashboard agent's listen-port file (the port the agent is
    told) before its raylet starts, so the raylet finds it at once instead of waiting for it."""
    from ray._private.node import Node
    from ray._raylet import DASHBOARD_AGENT_LISTEN_PORT_NAME, persist_port

    start = Node.start_raylet

    def start_raylet(node, *args, **kwargs):
        port = node._ray_params.dashboard_agent_listen_port
        persist_port(node._session_dir, node._node_id, DASHBOARD_AGENT_LISTEN_PORT_NAME, port)
        return start(node, *args, **kwargs)

    with mock.patch.object(Node, "start_raylet", start_raylet):
        yield


@contextmanager
def _node_lookup_retried():
    """The look-up of a starting node in the GCS (30 s, fixed in `ray._private.node`), retried
    until the node is there or `STARTUP_S` passed."""
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

    with mock.patch.object(services, "get_node", patient_get_node):
        yield


@contextmanager
def _environment(values: dict):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def node_table() -> list[dict]:
    """Ray's node table, in its order: one dict per node that ever joined (dead ones too)."""
    import ray

    return ray.nodes()


def is_head(node: dict) -> bool:
    return "node:__internal_head__" in node.get("Resources", {})


def number_new_nodes(numbers: dict[str, int]) -> dict[str, int]:
    """`numbers` (node id -> number) with every node of the table it lacks added (see above)."""
    out = dict(numbers)
    for node in sorted(node_table(), key=lambda n: (not is_head(n), n["NodeID"])):
        out.setdefault(node["NodeID"], len(out))
    return out


def node_name(node: dict) -> str:
    """How a node is named in messages: its address and the start of its Ray id."""
    return f"{node.get('NodeManagerAddress', '?')} ({str(node.get('NodeID', '?'))[:8]})"


def live_nodes_fitting(cpus: float) -> list[dict]:
    """The live nodes that could run a task asking for `cpus` CPUs (their total, not what is free)."""
    return [n for n in node_table() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= cpus]
