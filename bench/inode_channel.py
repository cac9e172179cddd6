"""How many bits a call can pass to the next call through inode numbers: pipes and sockets take
theirs from one kernel counter (get_next_ino, batched per CPU), so a sender call that makes many
pipes moves the number of the result pipe the zygote makes for the next call, which that call
can read (fstat of its own descriptor). One worker, calls alternating sender, receiver; each
sender sends one random bit (make `--pipes` pipes, or none); each receiver reports its result
pipe's inode, and a bit is read as 1 when the number moved by more than half of `--pipes`
since the last receiver. Capacity per call pair: 1 - H(bit error rate). Nothing is banned in
the pool: the kernel layer alone.

    python -m bench.inode_channel [--bits 64] [--pipes 3000]

Writes logs/bench/inode_channel.json.
"""

from __future__ import annotations

import argparse
import itertools
import math
import platform
import random

from bench.common import REPO, write_json
from unified.sandbox.executor import Executor, ExecutorConfig

OUT = REPO / "logs" / "bench" / "inode_channel.json"
SENDER = """
import os
def f(bit, pipes):
    made = 0
    for _ in range(pipes if bit else 0):
        try:
            r, w = os.pipe()
        except OSError:
            break
        os.close(r)
        os.close(w)
        made += 1
    return made
"""
RECEIVER = """
import os, stat
def f():
    for fd in range(3, 256):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode):
            return st.st_ino
    return None
"""


def capacity(error_rate: float) -> float:
    p = min(error_rate, 1 - error_rate)
    return 1.0 if p == 0 else 1 + p * math.log2(p) + (1 - p) * math.log2(1 - p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, default=64)
    parser.add_argument("--pipes", type=int, default=3000)
    args = parser.parse_args()
    bits = [random.Random(7 + k).randint(0, 1) for k in range(args.bits)]
    config = ExecutorConfig(workers=1, timeout_s=5.0, banned_modules=(), banned_calls=())
    made, inos = [], []
    with Executor(config) as ex:
        inos.append(ex.run(RECEIVER, "f").value)
        for bit in bits:
            made.append(ex.run(SENDER, "f", (bit, args.pipes)).value)
            inos.append(ex.run(RECEIVER, "f").value)
    read = [int(b - a > args.pipes // 2) if a is not None and b is not None else 0 for a, b in itertools.pairwise(inos)]
    errors = sum(x != y for x, y in zip(bits, read))
    result = {
        "bits": args.bits,
        "pipes_per_one": args.pipes,
        "pipes_made": sum(made),
        "bit_errors": errors,
        "error_rate": round(errors / args.bits, 3),
        "bits_per_pair": round(capacity(errors / args.bits), 3),
        "inode_steps": [b - a for a, b in itertools.pairwise(inos) if a is not None and b is not None][:16],
        "machine": platform.machine(),
    }
    print(result)
    write_json(OUT, result)


if __name__ == "__main__":
    main()
