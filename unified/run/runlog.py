"""Run logs: `logs/<run>/main.log`, per-round phase logs, TensorBoard scalars and text.

    logs/<run>/main.log                  everything, all rounds
    logs/<run>/round_<n>/phase_1_4.log   just that phase of that round
    logs/<run>/round_<n>/phase_5.log
    logs/<run>/tensorboard/              scalars in fixed namespaces (below), hparams, samples

TensorBoard namespaces (CleanRL style, fixed so runs compare): time/, tasks/, reward/,
eval/, losses/, train/, weights/, engine/, memory/. Only rank 0 writes anything; other
ranks get a RunLog whose methods do nothing, so callers never branch on rank.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from unified.errors import UserError

log = logging.getLogger("unified")
_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def memory_stats() -> dict[str, float]:
    import psutil
    import torch

    stats = {"memory/rss_gib": psutil.Process().memory_info().rss / 2**30}
    if torch.cuda.is_available():
        stats["memory/cuda_allocated_gib"] = torch.cuda.memory_allocated() / 2**30
        stats["memory/cuda_reserved_gib"] = torch.cuda.memory_reserved() / 2**30
    return stats


def check_run_folder(out_dir: Path, resume: str) -> None:
    """The convention for a folder that already holds a run (TRL's, not verl's): a run
    without `--resume` never writes into it, never moves it and never deletes it; it stops
    with one line saying how to continue it or where else to start. `--resume auto` (or a
    checkpoint path) continues it."""
    out_dir = Path(out_dir)
    if resume != "none":
        return
    checkpoints = sorted(p.name for p in (out_dir / "checkpoints").glob("round_*") if p.is_dir())
    if checkpoints:
        raise UserError(
            f"{str(out_dir)!r} already holds a run with checkpoints (newest {checkpoints[-1]}): continue it with "
            "--resume auto, or start a new run elsewhere with --output-dir DIR"
        )
    if (out_dir / "main.log").exists():
        raise UserError(
            f"{str(out_dir)!r} holds the logs of an earlier run that left no checkpoint: start a new run "
            f"elsewhere with --output-dir DIR, or delete {str(out_dir)!r} first"
        )


class RunLock:
    """One process per run folder. Two runs writing into one folder (a `--resume auto`
    started twice, say) would interleave their checkpoints, Parquet files and logs, so the
    second one stops with one line. An flock on `<folder>/.run.lock`: the kernel releases it
    when the holder ends, even by kill -9, so a stale file never blocks a resume."""

    NAME = ".run.lock"

    def __init__(self, out_dir: Path, enabled: bool = True):
        self.path, self.handle = Path(out_dir) / self.NAME, None
        if not enabled:
            return
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise UserError(
                f"{str(out_dir)!r} is in use by another run (pid {holder}): wait for it to end, or start "
                "a new run elsewhere with --output-dir DIR"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self.handle = handle

    def release(self) -> None:
        """Let go (idempotent). The file stays: a FolderGuard removes it with the rest when
        the run created it and fails before its first checkpoint."""
        if self.handle is None:
            return
        self.handle.close()  # closing the descriptor releases the flock
        self.handle = None


class FolderGuard:
    """Puts the run folder back exactly as it was when a run fails before it writes its
    first checkpoint: files it added are removed, the appended logs and the rewritten
    metrics.jsonl get their old bytes and times back, a folder it created is removed. After
    a checkpoint the run has made progress worth keeping, and nothing is undone."""

    RESTORED = ("main.log", "metrics.jsonl")  # rewritten at start-up (truncate on resume)

    def __init__(self, out_dir: Path, enabled: bool = True):
        self.out_dir = Path(out_dir)
        self.enabled = enabled
        self.existed = self.out_dir.exists()
        self.files = self._files() if enabled and self.existed else {}
        self.dirs = {p for p in self.out_dir.rglob("*") if p.is_dir()} if enabled and self.existed else set()
        self.saved = (
            {n: (self.out_dir / n).read_bytes() for n in self.RESTORED if (self.out_dir / n).is_file()} if enabled else {}
        )

    def _files(self) -> dict[Path, tuple[int, int, int]]:
        out = {}
        for p in self.out_dir.rglob("*"):
            if p.is_file() and not p.is_symlink():
                st = p.stat()
                out[p] = (st.st_size, st.st_atime_ns, st.st_mtime_ns)
        return out

    def wrote_checkpoint(self) -> bool:
        return any(p not in self.files for p in (self.out_dir / "checkpoints").rglob("*") if p.is_file())

    def restore(self) -> bool:
        """Undo this run unless it wrote a checkpoint; True when the folder was restored."""
        if not self.enabled or self.wrote_checkpoint():
            return False
        if not self.existed:
            shutil.rmtree(self.out_dir, ignore_errors=True)
            return True
        for path, now in self._files().items():
            before = self.files.get(path)
            if before is None:
                path.unlink(missing_ok=True)
            elif now != before:
                name = str(path.relative_to(self.out_dir))
                if name in self.saved:
                    path.write_bytes(self.saved[name])
                elif now[0] > before[0]:  # an appended phase log
                    os.truncate(path, before[0])
                os.utime(path, ns=before[1:])
        for folder in sorted((p for p in self.out_dir.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            if folder not in self.dirs:
                shutil.rmtree(folder, ignore_errors=True)
        return True


class RunLog:
    def __init__(self, out_dir: Path, enabled: bool = True):
        self.out_dir = Path(out_dir)
        self.enabled = enabled
        self.writer = None
        log.setLevel(logging.INFO)
        log.propagate = False
        for handler in list(log.handlers):  # a second run in the same process (tests)
            log.removeHandler(handler)
            handler.close()
        if not enabled:
            log.addHandler(logging.NullHandler())
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        console = logging.StreamHandler(sys.stdout)
        console.setFormatter(logging.Formatter("%(message)s"))
        main = logging.FileHandler(self.out_dir / "main.log")
        main.setFormatter(logging.Formatter(_FORMAT))
        log.addHandler(console)
        log.addHandler(main)

    def open_tensorboard(self, first_round: int = 1) -> None:
        """Start the TensorBoard writer; on resume, events from `first_round` on that a
        killed run left behind are purged so curves have one point per round."""
        if not self.enabled:
            return
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(self.out_dir / "tensorboard"), purge_step=first_round if first_round > 1 else None)

    @contextmanager
    def phase(self, round_index: int, name: str):
        """Route log lines of this phase to round_<n>/<name>.log too; yields a timer dict."""
        timer = {"seconds": 0.0}
        handler = None
        if self.enabled:
            folder = self.out_dir / f"round_{round_index}"
            folder.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(folder / f"{name}.log")
            handler.setFormatter(logging.Formatter(_FORMAT))
            log.addHandler(handler)
        start = time.perf_counter()
        try:
            yield timer
        finally:
            timer["seconds"] = time.perf_counter() - start
            if handler is not None:
                log.removeHandler(handler)
                handler.close()

    def hparams(self, table: dict, metrics: tuple[str, ...] = ()) -> None:
        """The hyper-parameters once: as a markdown table (CleanRL's habit) and in the
        HParams tab, written into this run's own event file so that tab shows `metrics`
        (scalar tags logged later) next to them."""
        if self.writer is None:
            return
        from torch.utils.tensorboard.summary import hparams

        rows = "\n".join(f"|{k}|{v}|" for k, v in sorted(table.items()))
        self.writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + rows, 0)
        values = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in table.items()}
        for summary in hparams(values, {m: 0.0 for m in metrics}):
            self.writer.file_writer.add_summary(summary)
        self.writer.flush()

    def image(self, tag: str, png: Path, step: int = 0) -> None:
        """A PNG file into TensorBoard's Images tab."""
        if self.writer is None or not Path(png).is_file():
            return
        import numpy as np
        from PIL import Image

        with Image.open(png) as im:
            self.writer.add_image(tag, np.asarray(im.convert("RGB")), step, dataformats="HWC")
        self.writer.flush()

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if self.writer is None:
            return
        for name, value in values.items():
            if value is not None:
                self.writer.add_scalar(name, float(value), step)
        self.writer.flush()

    def text(self, step: int, tag: str, text: str) -> None:
        if self.writer is not None:
            self.writer.add_text(tag, text, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        for handler in list(log.handlers):  # release main.log (a failed run's folder is restored next)
            if isinstance(handler, logging.FileHandler):
                log.removeHandler(handler)
                handler.close()
