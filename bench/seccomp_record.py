"""Record the system calls sandboxed programs make: the evidence behind `sandbox.allowlist`.

Every canonical solution of MBPP+ (399, bundled) and HumanEval (164) runs on every input of
EvalPlus's verdict (MBPP+: base and plus inputs; HumanEval: the calls its check code makes),
plus a short corpus of behaviours the sandbox allows on purpose (`SUPPLEMENT`: threads, a
fork, sleeping, /tmp files, an AF_UNIX socket pair, large allocations, the stdlib modules
a program may import), in a real pool whose seccomp filter LOGS instead of refusing
(`seccomp_filter.bpf(log=True)`): a call off the list runs as it would without a filter,
and the kernel writes an audit record (type 1326: pid, uid, syscall number) read here from
/dev/kmsg. The uid tells the two apart: 0 is a zygote (its work between calls), 200000 and
up is a call.

Passes, each with the union of what the earlier ones logged allowed (so that the next one
logs only what is new, and the kernel's audit backlog is not flooded):
  1. nothing allowed, on the first case of a few problems (everything a call does logs);
  2. the first case of every problem and the supplement;
  3. every case of every problem, and the supplement again; the list is complete when a pass
     logs nothing new.
Then `--strace N` traces one worker's zygote and its children (strace -f) over the first case
of every problem: the ARGUMENTS of the calls the allowlist narrows (fcntl, ioctl, prctl,
madvise, mmap, clone, socket, prlimit64), which an audit record does not carry.

    python -m bench.seccomp_record [--final] [--strace]

Writes docs/results/seccomp_record.json. Needs root (kernel isolation, /dev/kmsg) and sets
/proc/sys/kernel/printk_ratelimit to 0 while it runs (restored at the end): audit records
reach the log through printk, which otherwise drops all but 10 per 5 s. `--final` runs
one pass over everything with the filter as built (`sandbox.allowlist`) in log mode: the
check that the reviewed list misses nothing those programs do.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from unified.benchmarks.hidden import evalplus_cases, hidden_calls
from unified.benchmarks.load import load_problems
from unified.sandbox import config as sandbox_config
from unified.sandbox import seccomp_filter
from unified.sandbox.allowlist import CONDITIONAL
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "seccomp_record.json"
RATELIMIT = Path("/proc/sys/kernel/printk_ratelimit")
AUDIT = re.compile(rb"type=1326 .*? uid=(\d+) .*? pid=(\d+) .*? arch=([0-9a-f]+) syscall=(\d+)")
NARROWED = (
    "fcntl",
    "ioctl",
    "prctl",
    "madvise",
    "mmap",
    "clone",
    "socket",
    "socketpair",
    "prlimit64",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "kill",
    "tgkill",
    "mprotect",
)

SUPPLEMENT = {  # behaviours a program may have beyond the benchmarks' solutions: (code, entry, args)
    "threads": (
        "import threading\ndef f(n):\n    out = []\n    ts = [threading.Thread(target=out.append, args=(i,)) for i in range(n)]\n"
        "    [t.start() for t in ts]\n    [t.join() for t in ts]\n    return sorted(out)\n",
        "f",
        (4,),
    ),
    "thread_pool": (
        "from concurrent.futures import ThreadPoolExecutor\ndef f(n):\n    with ThreadPoolExecutor(2) as ex:\n"
        "        return list(ex.map(abs, range(-n, 0)))\n",
        "f",
        (5,),
    ),
    "fork_wait": (
        "import os\ndef f():\n    pid = os.fork()\n    if pid == 0:\n        os._exit(3)\n"
        "    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n",
        "f",
        (),
    ),
    "sleep": ("import time\ndef f(s):\n    time.sleep(s)\n    return time.monotonic() > 0 and time.time() > 0\n", "f", (0.01,)),
    "tmp_files": (
        "import os\ndef f(text):\n    os.makedirs('/tmp/d/e', exist_ok=True)\n    with open('/tmp/d/e/x.txt', 'w') as fh:\n"
        "        fh.write(text)\n    with open('/tmp/d/e/x.txt') as fh:\n        back = fh.read()\n"
        "    os.rename('/tmp/d/e/x.txt', '/tmp/d/y.txt')\n    names = sorted(os.listdir('/tmp/d'))\n"
        "    st = os.stat('/tmp/d/y.txt')\n    os.remove('/tmp/d/y.txt')\n    return back, names, st.st_size, os.getcwd()\n",
        "f",
        ("hello",),
    ),
    "socketpair": (
        "import socket\ndef f(b):\n    a, c = socket.socketpair()\n    a.sendall(b)\n    got = c.recv(16)\n"
        "    a.close(); c.close()\n    return got\n",
        "f",
        (b"ping",),
    ),
    "unix_socket": (
        "import socket\ndef f():\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    s.close()\n    return 'made'\n",
        "f",
        (),
    ),
    "big_memory": (
        "def f(n):\n    a = bytearray(n)\n    b = [0] * (n // 8)\n    a += bytes(n)\n    del b\n    return len(a)\n",
        "f",
        (64 << 20,),
    ),
    "memory_error": (
        "def f():\n    try:\n        return len(bytearray(1 << 40))\n    except MemoryError:\n        return 'MemoryError'\n",
        "f",
        (),
    ),
    "stdlib": (
        "import decimal, fractions, json, re, statistics, string, textwrap, unicodedata, bisect, heapq, array, struct\n"
        "import binascii, base64, zlib, copy, pprint, enum, dataclasses, typing, numbers, operator, functools\n"
        "import collections, math, cmath, itertools, io, csv, difflib, locale, os.path, sys, warnings\n"
        "def f(x):\n    return (str(decimal.Decimal(x) / 7)[:8], str(fractions.Fraction(x, 3)), json.dumps({'a': x}),\n"
        "            statistics.median([x, 1, 2]), unicodedata.name('a'), zlib.crc32(b'x'), base64.b64encode(b'x'),\n"
        "            struct.pack('<i', x), textwrap.shorten('a b c', 3), list(difflib.ndiff(['a'], ['b']))[:1])\n",
        "f",
        (5,),
    ),
    "print_and_raise": (
        "import sys\ndef f(x):\n    print('out', x)\n    print('err', x, file=sys.stderr)\n    raise ValueError(x)\n",
        "f",
        (1,),
    ),
    "recursion": (
        "import sys\ndef f(n):\n    sys.setrecursionlimit(10000)\n    g = lambda k: 0 if k == 0 else 1 + g(k - 1)\n    return g(n)\n",
        "f",
        (5000,),
    ),
    "cpu_loop": ("def f():\n    while True:\n        pass\n", "f", ()),
    "urandom_hash": ("import os\ndef f():\n    return len(os.urandom(8)), hash('x') == hash('x')\n", "f", ()),
}


class KernelLog:
    """Audit records of seccomp's LOG action, read from /dev/kmsg by a thread from now on."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.records: list[tuple[int, int, int, int]] = []  # (uid, pid, arch, syscall)
        self.lost = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                line = os.read(self.fd, 8192)
            except BrokenPipeError:  # records overwritten before we read them
                self.lost += 1
                continue
            except OSError:
                return
            m = AUDIT.search(line)
            if m:
                with self._lock:
                    self.records.append((int(m[1]), int(m[2]), int(m[3], 16), int(m[4])))
            elif b"audit_lost=" in line or b"backlog limit exceeded" in line:
                self.lost += 1

    def take(self, settle_s: float = 0.3) -> list[tuple[int, int, int, int]]:
        """What was logged since the last take (after the kernel's audit queue settles)."""
        time.sleep(settle_s)
        with self._lock:
            out, self.records = self.records, []
        return out


def syscall_name(number: int) -> str:
    import pyseccomp

    try:
        return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number).decode()
    except ValueError:
        return str(number)


def benchmark_calls(first_only: bool) -> list[tuple[str, list[ExecCall]]]:
    """(problem id, its canonical solution's calls) for MBPP+ and HumanEval."""
    out = []
    for name in ("mbpp", "humaneval"):
        for problem in load_problems(name):
            cases = evalplus_cases(problem)
            cases = tuple(c for c in cases if c.args is not None)
            if not cases or not problem.canonical_solution:
                continue
            calls = hidden_calls(problem, problem.canonical_solution, cases[:1] if first_only else cases)
            out.append((problem.problem_id, calls))
    return out


def run_pass(label: str, allowed: tuple[str, ...], conditional: bool, jobs, klog: KernelLog, seen: dict) -> dict:
    """Run `jobs` (source, calls) in a pool whose filter logs what `allowed` does not hold."""
    log_bpf = seccomp_filter.bpf(log=True, allowed=allowed, conditional=conditional)
    real = sandbox_config.seccomp_filter.bpf
    sandbox_config.seccomp_filter.bpf = lambda **_: log_bpf
    try:
        config = ExecutorConfig(workers=2, timeout_s=2.0, banned_modules=(), banned_calls=())  # the kernel layer alone
        ex = Executor(config)
    finally:
        sandbox_config.seccomp_filter.bpf = real
    new, statuses, start = Counter(), Counter(), time.monotonic()
    klog.take()
    try:
        assert ex.isolation.get("seccomp") and ex.isolation.get("pidns"), ex.isolation
        for source, calls in jobs:
            for r in ex.run_batch(calls):
                statuses[r.status] += 1
            for uid, _, arch, number in klog.take(0.0):
                name = syscall_name(number)
                who = "zygote" if uid == 0 else "call"
                entry = seen.setdefault(name, {"number": number, "arch": hex(arch), "by": {}, "first": {}})
                entry["by"][who] = entry["by"].get(who, 0) + 1
                entry["first"].setdefault(who, source)
                new[name] += 1
    finally:
        ex.close()
    for uid, _, arch, number in klog.take():  # stragglers of the last job
        name = syscall_name(number)
        entry = seen.setdefault(name, {"number": number, "arch": hex(arch), "by": {}, "first": {}})
        who = "zygote" if uid == 0 else "call"
        entry["by"][who] = entry["by"].get(who, 0) + 1
        new[name] += 1
    summary = {
        "pass": label,
        "allowed": len(allowed),
        "calls": sum(statuses.values()),
        "statuses": dict(statuses),
        "logged": dict(new.most_common()),
        "seconds": round(time.monotonic() - start, 1),
    }
    print(json.dumps(summary), flush=True)
    return summary


def trace_arguments(jobs) -> dict:
    """strace -f on one worker's zygote (and so every call it forks) over `jobs`: the
    argument values of the calls in NARROWED, by call."""
    config = ExecutorConfig(workers=1, timeout_s=2.0, banned_modules=(), banned_calls=())
    out = Path("/tmp/seccomp_record.strace")
    real = sandbox_config.seccomp_filter.bpf
    sandbox_config.seccomp_filter.bpf = lambda **_: None  # no filter: every call as it is made without one
    try:
        ex = Executor(config)
    finally:
        sandbox_config.seccomp_filter.bpf = real
    with ex:
        handle = ex._workers[0].proc.pid
        zygote = int(Path(f"/proc/{handle}/task/{handle}/children").read_text().split()[0])
        tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=" + ",".join(NARROWED), "-o", str(out), "-p", str(zygote)])
        time.sleep(1.0)
        for _, calls in jobs:
            ex.run_batch(calls)
        tracer.terminate()
        tracer.wait()
    values: dict[str, Counter] = defaultdict(Counter)
    for line in out.read_text().splitlines():
        m = re.match(r"\d+\s+(\w+)\((.*)\)\s+=", line)
        if m and m[1] in NARROWED:
            values[m[1]][_shape(m[1], m[2])] += 1
    out.unlink()
    return {name: dict(c.most_common()) for name, c in sorted(values.items())}


def _shape(name: str, args: str) -> str:
    """The arguments that matter for the rule, without addresses and descriptors."""
    parts = [p.strip() for p in re.split(r",(?![^{\[]*[}\]])", args)]
    pick = {
        "fcntl": [1],
        "ioctl": [1],
        "prctl": [0],
        "madvise": [2],
        "mmap": [2, 3],
        "clone": [1],
        "socket": [0, 1],
        "socketpair": [0, 1],
        "prlimit64": [0, 1],
        "unshare": [0],
        "setns": [1],
        "mount": [2, 3],
        "umount2": [1],
        "kill": [1],
        "tgkill": [2],
        "mprotect": [2],
    }.get(name, [])
    return ", ".join(parts[i] if i < len(parts) else "?" for i in pick)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--final", action="store_true", help="one pass with the built allowlist in log mode")
    parser.add_argument("--strace", action="store_true", help="also trace the narrowed calls' arguments")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("seccomp_record: needs root (kernel isolation and /dev/kmsg); run it as root")
    saved = RATELIMIT.read_text()
    RATELIMIT.write_text("0\n")
    klog, seen, passes = KernelLog(), {}, []
    firsts = benchmark_calls(first_only=True)
    supplement = [(f"supplement:{k}", [ExecCall(*v)]) for k, v in SUPPLEMENT.items()]
    try:
        if args.final:
            from unified.sandbox.allowlist import CALLS, ZYGOTE

            passes.append(run_pass("final", CALLS + ZYGOTE, True, benchmark_calls(False) + supplement, klog, seen))
        else:
            passes.append(run_pass("1: nothing allowed", (), False, firsts[:3] + firsts[-2:], klog, seen))
            broad = set(CONDITIONAL) | {"clone3"}
            allowed = lambda: tuple(sorted(set(seen) - broad))  # noqa: E731
            passes.append(run_pass("2: first cases", allowed(), True, firsts + supplement, klog, seen))
            passes.append(run_pass("3: every case", allowed(), True, benchmark_calls(False) + supplement, klog, seen))
    finally:
        RATELIMIT.write_text(saved)
    result = {
        "what": "system calls logged by seccomp's LOG action while canonical solutions ran in the sandbox",
        "command": "python bench/seccomp_record.py" + (" --final" if args.final else "") + (" --strace" if args.strace else ""),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "passes": passes,
        "audit_records_lost": klog.lost,
        "syscalls": dict(sorted(seen.items())),
    }
    if args.strace:
        result["arguments"] = trace_arguments(firsts + supplement)
    out = OUT.with_name("seccomp_record_final.json") if args.final else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
