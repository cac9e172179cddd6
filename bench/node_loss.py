"""What losing a node costs, on simulated nodes of this machine (docs/multinode.md).

Ray: a cluster of a head (4 CPUs) and a second node (2 CPUs) on loopback, Ray's own harness
as the multinode tests start it (tests/helpers/ray_nodes.py), and the `ray` executor
(executor.workers=2: 6 chunks per batch) running one batch of CPU-bound calls. Each repeat adds
a fresh second node, warms both nodes with one batch (not measured), runs the batch
undisturbed, then again with the second node removed (its raylet and services killed, -9) as
soon as a chunk of the batch runs there; the node's chunk is not held, so the loss comes at
whatever point of that chunk the poll saw it. Per repeat: the seconds of each batch and the
calls Ray ran again (`retried_calls`); the cost is the median of (lost - undisturbed).

torchrun (`--torchrun`): the two-agent launch of the multinode test
(tests/helpers/torchrun_nodes.py: `--nnodes=2 --nproc_per_node=1`, c10d on 127.0.0.1,
`--max-restarts=1 --resume auto`, the tiny model, 3 rounds, `trainer.deterministic=true`),
undisturbed and with rank 1's trainer killed (-9) right after round 1's checkpoint: seconds of
each, and whether the final weights are equal bit for bit.

The seconds are this machine's under its load at the time (`load_avg_1m` before and after, and
the CPU, are in the JSON); the retried calls are not timing.

    python -m bench.node_loss [--repeats 3] [--calls 24] [--torchrun] [--out PATH]   # --repeats 0: torchrun only
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import OUT, write_json
from tests.helpers import ray_nodes
from tests.helpers.e2e import final_weights
from tests.helpers.torchrun_nodes import finish, kill_after_first_checkpoint, launch
from unified.machine import cpu_info
from unified.sandbox.executor import ExecCall, ExecutorConfig
from unified.sandbox.executor_ray import RayExecutor

HEAD_CPUS, NODE_CPUS = 4, 2
CONFIG = ExecutorConfig(backend="ray", workers=2, timeout_s=30.0, wall_s=600.0)
WORK = "def f(x):\n    s = 0\n    for k in range(1_000_000):\n        s += k % (x + 2)\n    return (x, s)\n"


@dataclasses.dataclass(frozen=True)
class Repeat:
    """One repeat of the Ray batch: undisturbed, then with the second node lost mid-batch."""

    undisturbed_s: float
    lost_s: float
    retried_calls: int
    lost_counts: dict  # the lost batch's calls per node (`calls_node_<i>`)


def cost(repeats: list[Repeat]) -> dict:
    """Medians over the repeats: seconds undisturbed and with the loss, the extra seconds a loss
    cost (median of each repeat's difference), and the retried calls."""
    return {
        "repeats": len(repeats),
        "undisturbed_s": round(statistics.median(r.undisturbed_s for r in repeats), 2),
        "lost_s": round(statistics.median(r.lost_s for r in repeats), 2),
        "extra_s": round(statistics.median(r.lost_s - r.undisturbed_s for r in repeats), 2),
        "retried_calls": statistics.median(r.retried_calls for r in repeats),
    }


def _timed(run, *args) -> tuple[float, object]:
    start = time.perf_counter()
    out = run(*args)
    return time.perf_counter() - start, out


def _delta(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _values(results) -> list:
    return [(r.status, r.value, r.error) for r in results]


def ray_repeat(head, ex, calls: list[ExecCall]) -> Repeat:
    """Add a node, warm it, time the batch undisturbed, then with the node lost mid-batch."""
    node = ray_nodes.add_node(head, cpus=NODE_CPUS)
    ray_nodes.settled(HEAD_CPUS + NODE_CPUS)
    expected = _values(ex.run_batch(calls))  # the warm-up: every node's Ray workers and pools start
    assert all(status == "ok" for status, _, _ in expected), expected
    ray_nodes.settled(HEAD_CPUS + NODE_CPUS)
    undisturbed_s, results = _timed(ex.run_batch, calls)
    assert _values(results) == expected, "the undisturbed batch gave other results"
    ray_nodes.settled(HEAD_CPUS + NODE_CPUS)
    before = ex.stats()
    with ThreadPoolExecutor(1) as background:
        start = time.perf_counter()
        batch = background.submit(ex.run_batch, calls)
        while not batch.done() and not ray_nodes.running_chunks(node):
            time.sleep(0.02)
        assert not batch.done(), "the batch ended before a chunk ran on the second node"
        head.remove_node(node, allow_graceful=False)
        results = batch.result(timeout=ray_nodes.STARTUP_S)  # a hang guard only
        lost_s = time.perf_counter() - start
    assert _values(results) == expected, "the batch with a node lost gave other results"
    counts = _delta(ex.stats(), before)
    nodes = {k: v for k, v in counts.items() if k.startswith("calls_node_")}
    return Repeat(round(undisturbed_s, 2), round(lost_s, 2), counts.get("retried_calls", 0), nodes)


def ray_cost(repeats: int, n_calls: int) -> dict:
    calls = [ExecCall(WORK, "f", (i,)) for i in range(n_calls)]
    runs = []
    with ray_nodes.cluster(nodes=1, cpus=HEAD_CPUS) as (head, _):
        ex = RayExecutor(CONFIG)
        for k in range(repeats):
            runs.append(ray_repeat(head, ex, calls))
            r = runs[-1]
            print(
                f"ray {k + 1}/{repeats}: undisturbed {r.undisturbed_s:.1f} s, node lost {r.lost_s:.1f} s, "
                f"{r.retried_calls} call(s) retried, calls per node {r.lost_counts}",
                flush=True,
            )
    slots = (HEAD_CPUS + NODE_CPUS) // CONFIG.workers
    return {
        "calls": n_calls,
        "chunks": min(n_calls, 2 * slots),
        "workers": CONFIG.workers,
        "cpus": {"head": HEAD_CPUS, "node": NODE_CPUS},
        **cost(runs),
        "runs": [dataclasses.asdict(r) for r in runs],
    }


def torchrun_cost() -> dict:
    with tempfile.TemporaryDirectory(prefix="node-loss-") as tmp:
        undisturbed, killed = Path(tmp) / "undisturbed", Path(tmp) / "killed"
        undisturbed_s, _ = _timed(lambda: finish(undisturbed, launch(undisturbed)))
        print(f"torchrun: undisturbed {undisturbed_s:.1f} s", flush=True)
        start = time.perf_counter()
        agents = launch(killed)
        kill_after_first_checkpoint(killed, agents)
        finish(killed, agents)
        killed_s = time.perf_counter() - start
        a, b = final_weights(undisturbed), final_weights(killed)
        identical = a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)
        resumed = "continuing at round 2" in (killed / "main.log").read_text()
    print(
        f"torchrun: rank 1 killed after round 1 {killed_s:.1f} s (+{killed_s - undisturbed_s:.1f} s), "
        f"final weights {'bit-identical' if identical else 'DIFFERENT'}, resumed at round 2: {resumed}",
        flush=True,
    )
    return {
        "undisturbed_s": round(undisturbed_s, 1),
        "killed_s": round(killed_s, 1),
        "extra_s": round(killed_s - undisturbed_s, 1),
        "bit_identical": identical,
        "resumed_at_round_2": resumed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Ray: repeats of (undisturbed, node lost); 0: none")
    parser.add_argument("--calls", type=int, default=24, help="Ray: calls per batch")
    parser.add_argument(
        "--torchrun", action="store_true", help="also the two-node torchrun run, undisturbed and killed (minutes)"
    )
    parser.add_argument("--out", type=Path, default=OUT / "node_loss.json")
    args = parser.parse_args()

    cpu = cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['cores']} cores), load average {os.getloadavg()[0]:.1f}", flush=True)
    result = {"what": __doc__.splitlines()[0], "load_avg_1m_before": round(os.getloadavg()[0], 2)}
    if args.repeats:
        ray = result["ray"] = ray_cost(args.repeats, args.calls)
        print(
            f"ray: undisturbed {ray['undisturbed_s']} s, node lost {ray['lost_s']} s (+{ray['extra_s']} s), "
            f"{ray['retried_calls']} call(s) retried (medians of {ray['repeats']})",
            flush=True,
        )
    if args.torchrun:
        result["torchrun"] = torchrun_cost()
    result["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    write_json(args.out, result, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
