"""Per-round metrics: what every rank did, merged on rank 0, named in fixed namespaces.

time/     phase times (max over ranks), push time
tasks/    generated / kept per type, rejections per stage and reason
reward/   mean reward per task type and overall, parse-failure rate
eval/     pass@1 on the hidden tests (rounds where it was measured)
losses/   policy loss, KL, entropy, total loss
train/    grad norm, clip fraction, optimizer steps, dropped / skipped samples
weights/  aggregator version (optimizer steps so far), contributions
engine/   creations (must stay 1), pushes, failed pushes
executor/ sandbox calls this round, by status; timeouts by kind (timeout_cpu: the CPU
          limit, load-independent; timeout_wall: the wall-clock backstop, load-dependent)
memory/   RSS, CUDA allocated / reserved
"""

from __future__ import annotations

import json
import math
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from unified import kinds
from unified.trainer.distributed import all_gather
from unified.trainer.engine import engine_creations
from unified.trainer.update_stats import UpdateStats, token_weighted_mean
from unified.types import Rollout
from unified.values import to_literal, values_equal

LOSS_KEYS = {
    "pg_loss": "losses/pg_loss",
    "kl": "losses/kl",
    "entropy": "losses/entropy",
    "loss": "losses/total",
    "ppo_kl": "losses/ppo_kl",
}


def merge_rounds(parts: Sequence):
    """One RoundData from every rank's share (problems were split across ranks)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    joined = {
        f: tuple(x for p in parts for x in getattr(p, f))
        for f in ("problems", "program_candidates", "programs", "triples", "candidate_tasks", "tasks", "rejections")
    }
    pass_at_1 = {k: v for p in parts for k, v in p.pass_at_1.items()}
    completions = {k: v for p in parts for k, v in p.program_completions.items()}
    timings = {k: max(p.timings.get(k, 0.0) for p in parts) for k in first.timings}
    passing = frozenset(x for p in parts for x in p.visible_passing)
    return replace(
        first, pass_at_1=pass_at_1, timings=timings, program_completions=completions, visible_passing=passing, **joined
    )


def colocation_metrics(colocation) -> dict:
    """This round's `memory/gpu_update_gib` (the most over ranks; CUDA only) and
    `engine/sleeps` (run.colocate.Colocation); a collective: every rank calls it."""
    parts = all_gather(colocation.round_metrics() if colocation is not None else {})
    return {k: max(p.get(k, 0) for p in parts) for k in parts[0]}


def pipeline_metrics(data) -> dict:
    out = {f"time/{name}": s for name, s in data.timings.items()}
    generated, kept = data.generated_per_kind(), data.kept_per_kind()
    for kind in kinds.KINDS:
        out[f"tasks/generated_{kind}"] = generated[kind]
        out[f"tasks/kept_{kind}"] = kept[kind]
    out["tasks/kept"] = len(data.tasks)
    out["tasks/programs_kept"] = len(data.programs)
    out["tasks/programs_generated"] = len(data.program_candidates)
    out["tasks/triples"] = len(data.triples)
    out["tasks/samples_phase_1"] = sum(len(g) for g in data.program_completions.values())
    # problems where a sample passed the visible example
    out["tasks/found_problems"] = len({pid.rpartition("#")[0] for pid in data.visible_passing})
    for (stage, reason, kind), count in sorted(data.rejection_counts().items()):
        out[f"tasks/rejected/{stage}/{reason}" + (f"/{kind}" if kind else "")] = count
    measured = [v for v in data.pass_at_1.values() if v is not None]
    if measured and any(v is not None for v in data.pass_at_1.values()):
        out["eval/pass@1"] = sum(measured) / len(measured)
    return out


def agreement_counts(problems, solve_tasks, passes_hidden: dict[str, bool]) -> dict[str, int]:
    """One rank's counts behind `agreement/*` (`agreement_metrics`): problems, those with a
    label (a solve task), labels whose program passes the hidden tests (of those with hidden
    tests), and labels that contradict a visible example (of those with one)."""
    by_id = {p.problem_id: p for p in problems}
    out = dict(
        problems=len(problems),
        labelled=len(solve_tasks),
        scored=len(passes_hidden),
        accurate=sum(passes_hidden.values()),
        comparable=0,
        contradicts=0,
    )
    for task in solve_tasks:
        examples = {to_literal(c.args): c.expected for c in by_id[task.problem_id].visible if c.expected is not None}
        shared = [(c.expected, examples[to_literal(c.args)]) for c in task.cases if to_literal(c.args) in examples]
        if shared:
            out["comparable"] += 1
            out["contradicts"] += any(not values_equal(got, want, atol=task.atol) for got, want in shared)
    return out


def agreement_metrics(parts: Sequence[dict]) -> dict:
    """`agreement/labelled` (share of problems with a label), `agreement/label_accuracy` (share
    of labels whose program passes the hidden tests), `agreement/disagrees_visible` (share of
    labels that contradict a visible example), and the counts, summed over ranks."""
    total = {k: sum(p[k] for p in parts) for k in parts[0]}
    out = {f"agreement/{k}": v for k, v in total.items()}
    for name, num, den in (
        ("labelled_share", "labelled", "problems"),
        ("label_accuracy", "accurate", "scored"),
        ("disagrees_visible", "contradicts", "comparable"),
    ):
        if total[den]:
            out[f"agreement/{name}"] = total[num] / total[den]
    return out


def selection_metrics(parts: Sequence[tuple[int, int, int]]) -> dict:
    """Selective sampling, summed over ranks (each part: drawn, skipped, drawn with signal):
    `selective/drawn`, `selective/skipped` problems and `selective/signal`, the drawn ones
    with a group whose rewards differ."""
    drawn, skipped, signal = (sum(p[i] for p in parts) for i in range(3))
    return {"selective/drawn": drawn, "selective/skipped": skipped, "selective/signal": signal}


def rollout_metrics(rows: Sequence[Rollout]) -> dict:
    """Per kind: mean reward, parse-failure rate, groups (one task's completions) and those
    whose rewards differ (`tasks/signal_<kind>`); then the same over all rows."""
    out = {}
    for kind in kinds.KINDS:
        mine = [r for r in rows if r.kind == kind]
        if mine:
            out[f"reward/{kind}"] = sum(r.reward for r in mine) / len(mine)
            out[f"reward/parse_failure_rate_{kind}"] = sum(r.parse_failure is not None for r in mine) / len(mine)
            groups: dict = {}
            for r in mine:
                groups.setdefault(r.task_id, set()).add(r.reward)
            out[f"tasks/groups_{kind}"] = len(groups)
            out[f"tasks/signal_{kind}"] = sum(len(g) > 1 for g in groups.values())
    if rows:
        out["reward/mean"] = sum(r.reward for r in rows) / len(rows)
        out["reward/parse_failure_rate"] = sum(r.parse_failure is not None for r in rows) / len(rows)
        out["reward/completion_tokens"] = sum(r.num_tokens for r in rows) / len(rows)
    out["tasks/rollouts"] = len(rows)
    return out


def train_metrics(parts: Sequence[UpdateStats]) -> dict:
    """Every rank's update (token-weighted means, summed counts) -> metric names."""
    parts = [p for p in parts if p.micro_batches or p.samples]
    if not parts:
        return {}
    out = {}
    for key, name in {**LOSS_KEYS, "pg_clipfrac": "train/clip_frac"}.items():
        value = token_weighted_mean((p.losses[key], p.tokens) for p in parts if key in p.losses)
        if math.isfinite(value):
            out[name] = value
    first = parts[0]  # the global grad norm and the step count are the same on every rank
    out.update(
        {"train/grad_norm": first.grad_norm, "train/steps": first.steps, "train/skipped_nonfinite": first.skipped_nonfinite}
    )
    for key in (
        "samples",
        "used",
        "dropped_stale",
        "dropped_empty",
        "tokens",
        "groups",
        "groups_used",
        "zero_variance_groups",
        "dropped_zero_variance",
        "recomputed",
        "supervised",
    ):
        out[f"train/{key}"] = sum(getattr(p, key) for p in parts)
    return out


_EXECUTOR_SEEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # executor -> its counters after the last round


def executor_metrics(executor) -> dict:
    """`executor/<counter>`: this round's sandbox calls by status and timeouts by kind, summed
    over ranks. Per-round deltas (not totals since the pool started), so a resumed run logs
    the same numbers as an uninterrupted one. A collective: every rank calls it."""
    stats = executor.stats() if hasattr(executor, "stats") else {}
    before = _EXECUTOR_SEEN.get(executor, {})
    _EXECUTOR_SEEN[executor] = dict(stats)
    delta = {k: v - before.get(k, 0) for k, v in stats.items()}
    parts = all_gather(delta)
    return {f"executor/{k}": sum(p.get(k, 0) for p in parts) for k in sorted({k for p in parts for k in p})}


def state_metrics(aggregator, engine, memory: dict) -> dict:
    """Weight versions (the aggregator) and pushes (the resident engine; none in restart mode)."""
    stats = aggregator.stats()
    out = {
        "weights/version": stats["version"],
        "weights/total_contributions": stats["total_contributions"],
        "engine/creations": engine_creations(),
        "engine/pushes": engine.pushes if engine is not None else 0,
        "engine/failed_pushes": engine.failed_pushes if engine is not None else 0,
        "engine/last_push_s": engine.last_push_phases.get("total", 0.0) if engine is not None else 0.0,
        "train/dropped_stale_total": stats["dropped_stale"],
        "train/skipped_nonfinite_total": stats["skipped_nonfinite"],
    }
    out.update(memory)
    return out


def summary_line(round_index: int, rounds: int, m: dict, algorithm: str | None = None) -> str:
    """One console line per round; `legend_line()` explains its fields once at start."""

    def f(key, fmt="{:.3f}"):
        v = m.get(key)
        return "-" if v is None else fmt.format(v)

    kept = "/".join(str(m.get(f"tasks/kept_{k}", 0)) for k in kinds.KINDS)
    letters = "/".join(k.LETTER for k in kinds.KINDS.values())
    pushes = int(m.get("train/steps") or 0)
    signal = f"{int(m['train/groups_used'])}/{int(m['train/groups'])}" if m.get("train/groups") else "-"
    gpu = f" | gpu@update {m['memory/gpu_update_gib']:.2f} GiB" if "memory/gpu_update_gib" in m else ""
    per_push = f"{m['time/push'] / pushes:.2f}s" if pushes and m.get("time/push") is not None else "-"
    skipped = int(m.get("selective/skipped") or 0)
    drawn = f" | drawn {int(m['selective/drawn'])}/{int(m['selective/drawn']) + skipped}" if skipped else ""
    return (
        f"round {round_index}/{rounds}{' ' + algorithm if algorithm else ''}{drawn} | tasks {letters} {kept} | "
        f"reward {f('reward/mean')} | signal {signal} | pass@1 {f('eval/pass@1')} | loss {f('losses/total', '{:.4f}')} | "
        f"v{m.get('weights/version')} | pushes {pushes} x {per_push} | engine creations {m.get('engine/creations')} | "
        f"{f('time/round', '{:.1f}')}s | rss {f('memory/rss_gib', '{:.2f}')} GiB{gpu}"
    )


def legend_line() -> str:
    letters, names = "/".join(k.LETTER for k in kinds.KINDS.values()), "/".join(kinds.KINDS)
    return (
        f"each round prints: drawn = problems sampled / all (shown when pipeline.selective_keep skips some) | "
        f"tasks {letters} = {names} tasks kept after validation | "
        "reward = mean phase-5 rollout reward | signal = groups whose rewards differ (they train) / groups | pass@1 = greedy pass@1 on the hidden tests at the round's start | "
        "loss = training loss | vN = weight version (optimizer steps so far) | pushes K x S = weight pushes into the "
        "engine this round x seconds per push | engine creations (stays 1) | round seconds | rss = process memory | "
        "gpu@update = GPU memory in use at the update's peak (CUDA only; the engine asleep under rollout.sleep_between_phases)"
    )


def model_label(cfg) -> str:
    """How a run names its model: the configured path or name, or the embedded tiny model."""
    path = cfg.model.path
    return str(path) if path else "embedded tiny Qwen2 (for fast tests)"


def append_jsonl(path: Path, record: dict) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(record, default=float) + "\n")


def truncate_jsonl(path: Path, first_round: int) -> None:
    """Keep only the records of rounds before `first_round` (a resumed run rewrites the rest)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["round"] < first_round]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    tmp.replace(path)
