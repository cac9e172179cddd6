"""The process group: created first, before the engine, and checked after it.

Order matters (measured, see notes/platform-findings.md): vLLM reuses an existing default
process group, but if `LLM()` comes first then at world size 1 a later
`init_process_group` fails, and under torchrun every rank silently gets its own world of
size 1 (no gradient sync at all). So the round loop calls `init_distributed()` first and
`assert_world_size()` after building the engine.

The same code runs at world size 1 (a single-process gloo group on a free local port),
under torchrun on CPU (gloo) and on GPUs (NCCL; a gloo side group for small CPU reductions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from unified.errors import UserError


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but no CUDA GPU is visible")
    return torch.device(device)


def resolve_dtype(dtype: str, device_type: str, deterministic: bool = False) -> str:
    """The one place "auto" is decided: bf16 on GPUs and on CPUs with bf16 matrix units
    (avx512_bf16 or AMX: ~2.4x a float32 product), float32 on other CPUs and in the
    bit-reproducible mode (`deterministic`, whose exact-resume guarantee is stated in fp32)."""
    if dtype != "auto":
        return dtype
    if device_type == "cuda":
        return "bfloat16"
    return "bfloat16" if cpu_has_bf16() and not deterministic else "float32"


def cpu_has_bf16() -> bool:
    """The CPU reports bf16 matrix instructions (detected from its flags, never assumed)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


OWN_PORT = "UNIFIED_WORLD_OF_ONE_PORT"  # the MASTER_PORT a world of one set (inherited by child processes)


def _launched() -> bool:
    """True when a launcher (or the user) set the rendezvous, not a world of one: this
    process's earlier one, or a parent's whose port is still held by the parent."""
    port = os.environ.get("MASTER_PORT")
    if port is not None and port == os.environ.get(OWN_PORT):
        return False
    return "WORLD_SIZE" in os.environ or port is not None


def _world_of_one(backend: str) -> None:
    """A single-process group whose store holds its port from the start.

    Probing for a free port and binding it later races with every other process on the
    machine (a CI run failed with EADDRINUSE that way); a store bound to port 0 cannot.
    MASTER_PORT is then set to the store's port for code that reads it.
    """
    store = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    port = str(store.port)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    os.environ[OWN_PORT] = port
    dist.init_process_group(backend=backend, store=store, rank=0, world_size=1)


SHARED_STORE_OFF = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"  # torchrun's switch: a fresh store per rendezvous round


def check_restartable() -> None:
    """Refuse, in one line, a torchrun launch whose restart would hang.

    By default torchrun's agents keep ONE TCPStore for the workers of every rendezvous round
    (`TORCHELASTIC_USE_AGENT_STORE=True`), and nothing in it is scoped per restart: the keys
    of the process group the killed workers made (their gloo/NCCL addresses, barrier counts)
    are still there when the restarted workers make theirs, so these read addresses of dead
    processes (connection refused) or wait for counts that never come (a futex, forever:
    pytorch/pytorch#135712). `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` makes the c10d rendezvous
    give every round a store of its own. Only a run that may restart (`--max-restarts` > 0) is
    refused; the static rendezvous (`--master-addr` without `--rdzv-backend`) always shares."""
    shared = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if shared and int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0:
        raise UserError(
            f"torchrun --max-restarts > 0 with the store shared across restarts would hang the restarted "
            f"workers (pytorch#135712): export {SHARED_STORE_OFF}=1 and use --rdzv-backend=c10d "
            "(docs/multinode.md)"
        )


def init_distributed(device: str = "auto") -> DistInfo:
    """Create the default process group if none exists (idempotent); returns who we are."""
    dev = resolve_device(device)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if dev.type == "cuda":
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    if not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        if _launched():
            check_restartable()
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("RANK", "0")
            os.environ.setdefault("WORLD_SIZE", "1")
            dist.init_process_group(backend=backend)
        else:  # plain `python ...`: a world of one
            _world_of_one(backend)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, dev)


def assert_world_size() -> None:
    """Call after the engine exists: fails if it replaced or split the process group."""
    expected = int(os.environ.get("WORLD_SIZE", 1))
    if not dist.is_initialized():
        raise RuntimeError("no process group: call init_distributed() before building the engine")
    got = dist.get_world_size()
    if got != expected:
        raise RuntimeError(
            f"process group has world size {got}, launcher says {expected}: the engine was "
            "created before init_distributed() (each rank would train alone)"
        )


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def all_gather(obj) -> list:
    """Every rank's `obj` (anything picklable), in rank order: a one-element list at world
    size 1. A collective: every rank calls it."""
    if world_size() == 1:
        return [obj]
    out = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def all_reduce_int(value: int, op: str = "max") -> int:
    """Agree on one integer across ranks (e.g. how many micro-batches every rank runs)."""
    if world_size() == 1:
        return int(value)
    t = torch.tensor([int(value)], dtype=torch.int64)
    red = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "sum": dist.ReduceOp.SUM}[op]
    dist.all_reduce(t, op=red, group=_cpu_group())
    return int(t.item())


_CPU_GROUP = None


def _cpu_group():
    """The default group when it is gloo; else a gloo group for small CPU reductions."""
    global _CPU_GROUP
    if "gloo" in str(dist.get_backend()):
        return None
    if _CPU_GROUP is None:
        _CPU_GROUP = dist.new_group(backend="gloo")
    return _CPU_GROUP
