"""The `ray` executor on a Ray cluster of several nodes, simulated on this machine by Ray's own
harness (tests/helpers/ray_nodes.py: a head and worker nodes, each its own raylet, all on
127.0.0.1): chunks spread over the nodes and counted per node; a node lost in the middle of a
batch costs nothing but the re-run of the chunk it was running (Ray's task retry); a chunk
lost past its retries fails in one line naming the node. No assertion depends on timing: a
chunk is caught mid-run by stopping its Ray worker (SIGSTOP) before the node is removed.

Broken code fails here: with the retry switched off (`max_retries=0` in executor_ray.py) the
lost node's chunk raises instead of being re-run; without the per-node counting, or with
every chunk on one node, the counts differ.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import ray_nodes
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig
from unified.sandbox.executor_ray import RayExecutor

ray = pytest.importorskip("ray", reason="ray is not installed")
pytestmark = [pytest.mark.multinode, pytest.mark.slow, pytest.mark.timeout(900)]

# a few hundred ms of CPU per call, so a chunk of them is still running when it is caught
WORK = "def f(x):\n    s = 0\n    for k in range(1_500_000):\n        s += k % (x + 2)\n    return (x, s)\n"
CALLS = [ExecCall(WORK, "f", (i,)) for i in range(22)] + [
    ExecCall("def f():\n    raise KeyError('k')", "f"),  # an error comes back as the same error
    ExecCall("import socket\ndef f():\n    return 1", "f"),  # banned in the parent, on any node
]
ID = ExecCall("def f():\n    return id(object())", "f")  # differs between two workers' runs
CONFIG = ExecutorConfig(backend="ray", workers=2, timeout_s=30.0, wall_s=600.0)  # no load-dependent timeout


@pytest.fixture(scope="module")
def head():
    """A Ray cluster of one head node (2 CPUs); each test adds the nodes it needs."""
    with ray_nodes.cluster(nodes=1, cpus=2) as (c, _):
        yield c


@pytest.fixture(scope="module")
def reference():
    """What an undisturbed pool on this machine answers: (status, value, error) per call."""
    with Executor(dataclasses.replace(CONFIG, backend="local")) as pool:
        return [_outcome(r) for r in pool.run_batch(CALLS)]


def _outcome(r):
    return r.status, r.value, r.error


def _number(ex: RayExecutor, node) -> int:
    """The node's number in the executor's counters (`calls_node_<number>`)."""
    return ex.node_numbers()[node.node_id]


def _delta(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def test_a_batch_spreads_over_the_nodes_and_counts_calls_per_node(head, reference):
    node = head.add_node(num_cpus=2)
    head.wait_for_nodes()
    ex = RayExecutor(dataclasses.replace(CONFIG, workers=1))
    before = ex.stats()
    assert [_outcome(r) for r in ex.run_batch(CALLS)] == reference
    counts = _delta(ex.stats(), before)
    assert _number(ex, head.head_node) == 0  # the head is node 0
    on_head, on_node = counts.get("calls_node_0", 0), counts.get(f"calls_node_{_number(ex, node)}", 0)
    assert on_head > 0 and on_node > 0, counts  # both nodes ran chunks
    assert on_head + on_node == len(CALLS) and counts.get("retried_calls", 0) == 0, counts
    head.remove_node(node)


def test_a_node_lost_mid_batch_costs_only_the_rerun_of_its_chunk(head, reference):
    node = head.add_node(num_cpus=2)
    head.wait_for_nodes()
    ex = RayExecutor(CONFIG)
    calls = [*CALLS, ID]
    undisturbed = ex.run_twice(calls)
    before = ex.stats()
    with ThreadPoolExecutor(1) as background:
        batch = background.submit(ex.run_twice, calls)
        frozen = ray_nodes.freeze_a_chunk(node, batch.done)
        assert frozen is not None, "no chunk ran on the second node"
        ray_nodes.lose_node(head, node, frozen)
        pairs = batch.result(timeout=600)  # a hang guard only
    # every call's result is the undisturbed run's, in order, nothing lost
    assert [(_outcome(a), _outcome(b)) for a, b in pairs[:-1]] == [(o, o) for o in reference]
    assert [(_outcome(a), _outcome(b)) for a, b in undisturbed[:-1]] == [(o, o) for o in reference]
    # run_twice's pairs still ran on two different workers (id() differs), also when re-run
    assert pairs[-1][0].value != pairs[-1][1].value and undisturbed[-1][0].value != undisturbed[-1][1].value
    counts = _delta(ex.stats(), before)
    size = -(-len(calls) // 4)  # 4 chunks: 2 per slot, 2 slots of 2 CPUs
    # only the chunk the lost node was running ran again, once; each call counted on one node
    assert counts["retried_calls"] == size, counts
    on_head, on_node = counts.get("calls_node_0", 0), counts.get(f"calls_node_{_number(ex, node)}", 0)
    assert on_head + on_node == len(calls) and on_head >= size, counts  # the head ran the re-run chunk


def test_a_chunk_lost_past_its_retries_fails_in_one_line_naming_the_node(head):
    node = head.add_node(num_cpus=2)
    head.wait_for_nodes()
    ex = RayExecutor(dataclasses.replace(CONFIG, ray_max_retries=0))
    with ThreadPoolExecutor(1) as background:
        batch = background.submit(ex.run_batch, CALLS)
        frozen = ray_nodes.freeze_a_chunk(node, batch.done)
        assert frozen is not None, "no chunk ran on the second node"
        ray_nodes.lose_node(head, node, frozen)
        with pytest.raises(RuntimeError) as failure:
            batch.result(timeout=600)  # a hang guard only: it must raise, not wait
    message = str(failure.value)
    assert "\n" not in message and "after 0 retries" in message and node.node_id[:8] in message, message
    assert [_outcome(r) for r in ex.run_batch(CALLS[-2:])] != []  # the executor still runs on the head
