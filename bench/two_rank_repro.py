"""How often two two-rank deterministic runs started side by side under load end differently.

Each repeat starts two runs of the multinode test's launch at the same time
(tests/helpers/torchrun_nodes.py: two torchrun agents, `--nnodes=2 --nproc_per_node=1`, c10d
on 127.0.0.1, the tiny model, 3 rounds, `trainer.deterministic=true`), with `--busy`
CPU-burning processes beside them (default: one per core), and compares the two runs bit for
bit: the final weights' tensors and every round's `train/` and `weights/` metrics
(`differences`). A pair differs when either does. Nothing here is timed except the seconds
each repeat took, which are this machine's under its load (`load_avg_1m` and the CPU are in
the JSON). docs/design.md states the conditions under which 0 pairs may differ.

    python -m bench.two_rank_repro [--repeats 10] [--busy N] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.common import OUT, write_json
from tests.helpers.torchrun_nodes import differences, side_by_side
from unified.machine import cpu_info


def repeat(index: int, busy: int) -> dict:
    """One pair, side by side: -> what differed (tensor count, the first metrics that differ)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="two_rank_") as tmp:
        diff = differences(*side_by_side(Path(tmp), busy))
    row = {
        "repeat": index,
        "differ": bool(diff["tensors"] or diff["metrics"]),
        "tensors_differ": len(diff["tensors"]),
        "metrics_differ": [list(m) for m in diff["metrics"][:6]],
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(
        f"repeat {index}: {'DIFFER' if row['differ'] else 'identical'} ({row['tensors_differ']} tensors, "
        f"{len(diff['metrics'])} metrics) in {row['seconds']} s",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="CPU-burning processes beside each pair")
    parser.add_argument("--out", default=str(OUT / "two_rank_repro.json"))
    args = parser.parse_args()
    cpu = cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['kind']}, {cpu['cores']} cores), load average {os.getloadavg()[0]:.1f}", flush=True)
    result = {"what": __doc__.splitlines()[0], "busy": args.busy, "load_avg_1m_before": round(os.getloadavg()[0], 2)}
    rows = []
    for i in range(args.repeats):
        rows.append(repeat(i, args.busy))
        result.update(repeats=len(rows), pairs_differed=sum(r["differ"] for r in rows), pairs=rows)
        result["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
        write_json(args.out, result, indent=2)  # after every repeat: a stopped bench keeps what it measured
    print(f"{result['pairs_differed']} of {len(rows)} pairs differed -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
