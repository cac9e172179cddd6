"""The `ray` executor on a Ray cluster of several nodes, simulated on this machine by Ray's own
harness (tests/helpers/ray_nodes.py: a head and worker nodes, each its own raylet, all on
127.0.0.1): chunks spread over the nodes and counted per node; a node lost in the middle of a
batch costs nothing but the re-run of the chunk it was running (Ray's task retry); a chunk
lost past its retries fails in one line naming the node.

No assertion depends on timing: where a test needs a chunk mid-run (or a Ray worker kept from
taking another chunk), it stops that chunk's Ray worker (SIGSTOP) while it runs; a node starts
whatever the machine's load (the helper). Waits have a generous hang guard only.

Broken code fails here: with the retry switched off (`max_retries=0` in executor_ray.py) the
lost node's chunk raises instead of being re-run; without SPREAD a batch the head alone can
run stays on the head (Ray's default placement prefers the driver's node while it is less than
half busy); without the per-node counting the counts differ.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import ray_nodes
from tests.helpers.need_ray import real_ray
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig
from unified.sandbox.executor_ray import RayExecutor

ray = real_ray()
pytestmark = [pytest.mark.multinode, pytest.mark.slow, pytest.mark.timeout(1800)]

HEAD_CPUS, NODE_CPUS = 4, 2  # a head with room to spare: a small batch would fit on it alone
# a few hundred ms of CPU per call, so a chunk of them is seen while it runs
WORK = "def f(x):\n    s = 0\n    for k in range(1_000_000):\n        s += k % (x + 2)\n    return (x, s)\n"
CALLS = [ExecCall(WORK, "f", (i,)) for i in range(22)] + [
    ExecCall("def f():\n    raise KeyError('k')", "f"),  # an error comes back as the same error
    ExecCall("import socket\ndef f():\n    return 1", "f"),  # banned in the parent, on any node
]
ID = ExecCall("def f():\n    return id(object())", "f")  # differs between two workers' runs
CONFIG = ExecutorConfig(backend="ray", workers=2, timeout_s=30.0, wall_s=600.0)  # no load-dependent timeout


@pytest.fixture(scope="module")
def head():
    """A Ray cluster of one head node; each test adds the node it needs."""
    with ray_nodes.cluster(nodes=1, cpus=HEAD_CPUS) as (c, _):
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


def _on_nodes(ex: RayExecutor, counts: dict, node) -> tuple[int, int]:
    """(calls the head ran, calls `node` ran) in `counts`."""
    return counts.get("calls_node_0", 0), counts.get(f"calls_node_{_number(ex, node)}", 0)


def test_a_batch_spreads_over_the_nodes_and_counts_calls_per_node(head, reference):
    node = ray_nodes.add_node(head, cpus=NODE_CPUS)
    ray_nodes.settled(HEAD_CPUS + NODE_CPUS)  # Ray's scheduler sees the new node, idle
    ex = RayExecutor(dataclasses.replace(CONFIG, workers=1))
    # a batch of two chunks, which the head alone could run: one runs on each node. Each chunk
    # is held while it runs, so neither Ray worker can take the other chunk too.
    two = [ExecCall(WORK, "f", (0,)), ExecCall(WORK, "f", (1,))]
    with ThreadPoolExecutor(1) as background:
        batch = background.submit(ex.run_batch, two)
        held = ray_nodes.hold_chunks([head.head_node, node], lambda held: len(held) == 2, batch.done)
        ray_nodes.release(held)
        assert [_outcome(r) for r in batch.result(timeout=ray_nodes.STARTUP_S)] == reference[:2]  # a hang guard only
    counts = ex.stats()
    assert _number(ex, head.head_node) == 0  # the head is node 0
    assert _on_nodes(ex, counts, node) == (1, 1), counts  # not both on the head: SPREAD
    # a batch of many chunks: every result is the local pool's, each call counted on one node
    # (which node ran how many depends on how fast each node's Ray workers are: not asserted)
    ray_nodes.settled(HEAD_CPUS + NODE_CPUS)
    ex = RayExecutor(CONFIG)  # 6 chunks on 3 slots: fewer Ray workers to start than with workers=1
    assert [_outcome(r) for r in ex.run_batch(CALLS)] == reference
    counts = ex.stats()
    assert sum(_on_nodes(ex, counts, node)) == len(CALLS) and counts.get("retried_calls", 0) == 0, counts
    head.remove_node(node)


def _lose_a_chunk_of(ex: RayExecutor, run, calls, head, node):
    """Run `run(calls)` and lose `node` while it runs one of the chunks: the head's chunks are
    held (so the head cannot take every chunk) until one runs on `node`, then `node` is removed
    with its chunk mid-run. -> the batch's future."""

    def on_node(held):
        return [(n, proc) for n, proc in held if n is node]

    background = ThreadPoolExecutor(1)
    batch = background.submit(run, calls)
    held = ray_nodes.hold_chunks([head.head_node, node], on_node, batch.done)
    assert on_node(held), "no chunk ran on the second node"
    ray_nodes.lose_node(head, node, on_node(held))
    ray_nodes.release([h for h in held if h not in on_node(held)])
    background.shutdown(wait=False)
    return batch


def test_a_node_lost_mid_batch_costs_only_the_rerun_of_its_chunk(head, reference):
    node = ray_nodes.add_node(head, cpus=NODE_CPUS)
    ex = RayExecutor(CONFIG)
    calls = [*CALLS, ID]
    before = ex.stats()
    pairs = _lose_a_chunk_of(ex, ex.run_twice, calls, head, node).result(timeout=ray_nodes.STARTUP_S)  # a hang guard only
    # every call's result is the undisturbed pool's, in order, nothing lost
    assert [(_outcome(a), _outcome(b)) for a, b in pairs[:-1]] == [(o, o) for o in reference]
    # run_twice's pairs still ran on two different workers (id() differs), also when re-run
    assert pairs[-1][0].value != pairs[-1][1].value
    counts = _delta(ex.stats(), before)
    slots = (HEAD_CPUS + NODE_CPUS) // CONFIG.workers
    size = -(-len(calls) // (2 * slots))  # 2 chunks per slot, all of this size (25 calls, 5 chunks)
    # only the chunk the lost node was running ran again, once; each call counted on one node
    assert counts["retried_calls"] == size, counts
    on_head, on_node = _on_nodes(ex, counts, node)
    assert on_head + on_node == len(calls) and on_head >= size, counts  # the head ran the re-run chunk


def test_a_chunk_lost_past_its_retries_fails_in_one_line_naming_the_node(head):
    node = ray_nodes.add_node(head, cpus=NODE_CPUS)
    ex = RayExecutor(dataclasses.replace(CONFIG, ray_max_retries=0))
    batch = _lose_a_chunk_of(ex, ex.run_batch, CALLS, head, node)
    with pytest.raises(RuntimeError) as failure:
        batch.result(timeout=ray_nodes.STARTUP_S)  # a hang guard only: it must raise, not wait
    message = str(failure.value)
    assert "\n" not in message and "after 0 retries" in message and node.node_id[:8] in message, message
    assert [_outcome(r) for r in ex.run_batch(CALLS[-2:])] != []  # the executor still runs on the head
