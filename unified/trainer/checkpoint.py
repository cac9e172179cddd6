"""Checkpoints: plain folders, written atomically, found again by `--resume auto`.

    checkpoints/
      round_000004/            one per saved round
        model/                 Hugging Face format (transformers and vLLM load it)
        optimizer.pt           full (unsharded) optimizer state
        state.pt               round, aggregator state, RNG states, anything else small
        config.yaml            the resolved config of the run
        manifest.json          size + sha256 of every file above, written last
      latest                   text file naming the newest complete checkpoint

A checkpoint is built in a `.tmp-*` folder and renamed into place, and `latest` is
replaced by rename, so a crash (even `kill -9`) leaves either the old or the new
checkpoint, never half of one. On resume a checkpoint whose files do not match its
manifest is skipped with a warning and the previous one is used. Only rank 0 writes;
callers gather full weights/optimizer state on all ranks first.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from unified.files import LATEST, latest_checkpoint, sha256

log = logging.getLogger("unified")
PREFIX = "round_"


def rng_state() -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _manifest(folder: Path) -> dict:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "manifest.json")
    return {str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    root: Path,
    round_index: int,
    *,
    write_model: Callable[[Path], None],
    optimizer_state: dict,
    state: dict,
    config_yaml: str,
    keep: int = 3,
) -> Path:
    """Write round `round_index`'s checkpoint under `root`; returns its folder."""
    root.mkdir(parents=True, exist_ok=True)
    name = f"{PREFIX}{round_index:06d}"
    tmp = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write_model(tmp / "model")
    torch.save(optimizer_state, tmp / "optimizer.pt")
    torch.save({**state, "round": round_index, "rng": rng_state()}, tmp / "state.pt")
    (tmp / "config.yaml").write_text(config_yaml)
    (tmp / "manifest.json").write_text(json.dumps(_manifest(tmp), indent=1))
    final = root / name
    if final.exists():  # re-saving a round (e.g. a signal right after a periodic save)
        shutil.rmtree(final)
    os.rename(tmp, final)
    latest_tmp = root / f".latest-{os.getpid()}"
    latest_tmp.write_text(name + "\n")
    os.replace(latest_tmp, root / LATEST)
    _fsync_dir(root)
    _prune(root, keep)
    return final


def _prune(root: Path, keep: int) -> None:
    if keep <= 0:
        return
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".tmp-*"):  # leftovers of a killed save
        shutil.rmtree(stale, ignore_errors=True)


def list_checkpoints(root: Path) -> list[Path]:
    """Complete-looking checkpoint folders, oldest first."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def is_valid(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    for rel, meta in manifest.items():
        path = folder / rel
        if not path.is_file() or path.stat().st_size != meta["bytes"] or sha256(path) != meta["sha256"]:
            return False
    return bool(manifest)


def find_resume(root: Path, resume: str) -> Path | None:
    """`none` -> None; a path -> that checkpoint (validated); `auto` -> the newest valid one,
    falling back past corrupted ones with a warning."""
    if resume == "none":
        return None
    if resume != "auto":
        folder = Path(resume).expanduser()
        if (folder / LATEST).exists():  # a checkpoints/ root was given
            return find_resume(folder, "auto")
        if not is_valid(folder):
            raise ValueError(f"checkpoint {str(folder)!r} is incomplete or corrupted: pick another, or --resume auto")
        return folder
    candidates = list_checkpoints(root)
    named = latest_checkpoint(root)
    if named is not None:
        candidates = [c for c in candidates if c.name <= named.name] or candidates
    for folder in reversed(candidates):
        if is_valid(folder):
            return folder
        log.warning("checkpoint %s is corrupted or incomplete; falling back to the previous one", folder)
    return None


def saved_progress(folder: Path) -> tuple[int, int]:
    """(round, weight version) a checkpoint was saved at, without its optimizer state."""
    state = torch.load(folder / "state.pt", weights_only=False)
    return int(state["round"]), int(state["aggregator"]["version"])


def load_checkpoint(folder: Path) -> tuple[dict, dict]:
    """(state, optimizer_state) of a checkpoint; the weights are in folder/'model'."""
    state = torch.load(folder / "state.pt", weights_only=False)
    optimizer_state = torch.load(folder / "optimizer.pt", weights_only=False)
    return state, optimizer_state
