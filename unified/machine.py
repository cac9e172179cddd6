"""What machine a result came from: the CPU's model name and the flags that change bf16
numerics (bf16 greedy decoding differs between an AVX512-BF16 AMD EPYC and an AMX Xeon, so a
result is only compared with a control measured on the same CPU kind), and the commit.

    settings = {"cpu": cpu_info(), "commit": git_commit()}
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu_info(cpuinfo: str | None = None) -> dict:
    """{"model", "kind", "avx512_bf16", "amx_bf16", "cores", "arch"}; `kind` is what results are
    grouped by ("AMD EPYC", "Intel Xeon (AMX)", ... or the model name). `cpuinfo`: the text of
    /proc/cpuinfo (read when None; empty where there is none)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model, flags = fields.get("model name", platform.processor() or "unknown"), set(fields.get("flags", "").split())
    return {
        "model": model,
        "kind": cpu_kind(model, "amx_bf16" in flags),
        "avx512_bf16": "avx512_bf16" in flags,
        "amx_bf16": "amx_bf16" in flags,
        "cores": os.cpu_count(),
        "arch": platform.machine(),
    }


def cpu_kind(model: str, amx: bool) -> str:
    """The CPU kind results are compared within."""
    if "EPYC" in model:
        return "AMD EPYC"
    if "Xeon" in model or "Intel" in model:
        return "Intel Xeon (AMX)" if amx else "Intel Xeon"
    return model


def git_commit(repo: Path = REPO) -> str | None:
    """HEAD's hash, with "+dirty" when tracked files differ from it; None outside a checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")
