"""File helpers the package shares (standard library only): a digest of files, a JSONL reader
that survives a line torn by a kill, and the checkpoint a checkpoints folder's `latest` names."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

LATEST = "latest"  # a checkpoints folder's pointer file: the newest complete checkpoint's name


def sha256(*paths: str | Path) -> str:
    """The sha256 of the files' bytes, one after another (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def read_jsonl(path: str | Path) -> list[dict]:
    """The JSON objects of a JSONL file, in order; blank lines, lines that are not JSON (a line
    cut off by a kill) and values that are not objects are left out. No file: no rows."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def latest_checkpoint(root: str | Path) -> Path | None:
    """The checkpoint `root/latest` names (None without the pointer); not checked for completeness."""
    pointer = Path(root) / LATEST
    return pointer.parent / pointer.read_text().strip() if pointer.is_file() else None
