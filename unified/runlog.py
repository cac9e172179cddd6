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
import sys
import time
from contextlib import contextmanager
from pathlib import Path

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


def set_aside_previous_run(out_dir: Path) -> Path | None:
    """A fresh run (no resume) into a folder that holds an earlier run: move the earlier
    run to `<out_dir>.<timestamp>` rather than mix or delete it. Returns where it went."""
    out_dir = Path(out_dir)
    if not (out_dir / "main.log").exists() and not (out_dir / "checkpoints").exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = out_dir.with_name(f"{out_dir.name}.{stamp}")
    n = 1
    while target.exists():
        target, n = out_dir.with_name(f"{out_dir.name}.{stamp}-{n}"), n + 1
    out_dir.rename(target)
    return target


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

    def hparams(self, table: dict) -> None:
        """The hyper-parameters once, as a markdown table (CleanRL's habit)."""
        if self.writer is None:
            return
        rows = "\n".join(f"|{k}|{v}|" for k, v in sorted(table.items()))
        self.writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + rows, 0)

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
