"""The design unified replaces, kept only to measure against (bench/round_time.py).

No resident engine: every phase writes the current weights to a temporary folder, starts
a fresh engine on them (warm-up included, as the old design paid it too), and tears it
down afterwards (consolidation, on by default, gets one of its own). Phase 5's pushes go into
that phase's engine. Run exactly like
`train_unified.py`:

    python -m bench.restart_mode --benchmark mbpp --problems 4 --rounds 2 --output-dir DIR
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import contextmanager

import torch.distributed as dist

import unified.run.components as components
import unified.run.consolidation as consolidation
import unified.run.loop as loop
import unified.run.measure as measure


@contextmanager
def fresh_engine_per_phase(c):
    """Current weights -> a temporary HF folder -> a fresh engine -> torn down."""
    from unified.run.telemetry import MeteredEngine
    from unified.trainer.engine import build_engine_from_config

    state = c.policy.full_state_dict()
    with tempfile.TemporaryDirectory(prefix="unified-restart-") as folder:
        c.policy.write_pretrained(folder, state, c.tokenizer)  # each rank: its own local copy
        engine = build_engine_from_config(
            c.cfg.rollout, folder, dtype=c.cfg.model.dtype, seed=c.cfg.seed + c.dist.rank, allow_another=True
        )
        components.warm_up(engine)
        engine.version = c.aggregator.version
        try:
            yield MeteredEngine(engine, c.ledger)
        finally:
            close_keeping_process_group(engine)


def close_keeping_process_group(engine) -> None:
    """Tear an engine down without letting vLLM destroy the default process group (which
    the policy's FSDP mesh still uses); vLLM's own sub-groups are destroyed as usual."""
    original = dist.destroy_process_group
    dist.destroy_process_group = lambda group=None: None if group is None else original(group)
    try:
        engine.close()
    finally:
        dist.destroy_process_group = original


def main() -> int:
    components.resident_engine = lambda *args, **kwargs: None  # no engine outlives a phase
    # every phase that generates, consolidation's greedy answers and the final evaluation too
    loop.phase_engine = measure.phase_engine = consolidation.phase_engine = fresh_engine_per_phase
    from train_unified import main as train_main

    return train_main()


if __name__ == "__main__":
    sys.exit(main())
