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

Nodes are numbered once, when first seen: the head 0, then the others in Ray's node-table
order (by node id), a dead node keeping its number; drivers that connect to one cluster at
the same time (every torchrun rank) give a node the same number.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

# Ray takes a node's address from the route to the outside unless "cluster mode" is off, in
# which case it is 127.0.0.1 (ray._private.services.get_node_ip_address); the switch is read
# from the environment when ray is imported, and by every process that the instance starts.
CLUSTER_MODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


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
        with loopback():
            ray.init(address="local", include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return True


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
