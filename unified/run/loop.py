"""The round loop: build everything once, then N rounds, each read top to bottom.

_, cfg = load_config(overrides)           the one typed, frozen TrainConfig (schema.py), validated once
run = build_components(cfg)               policy, ONE engine, executor, aggregator (immutable wiring)
state = run.start_state                   the run's learning state (pipeline/plan.py RunState)
for round r:
    plan_round     every lever's choice for the round, once (pipeline/plan.py RoundPlan)
    make_tasks     phases 1-4: programs -> IPO triples -> tasks -> validation   (pipeline)
    measure_round  the round's one measurement: greedy pass@1 of its start weights, pass@k, labels
    update_policy  phase 5: rollouts -> rewards -> verl loss -> optimizer step -> push into engine
    consolidate    when the plan says so: found answers become greedy answers
    state.after    what the round taught, applied once
    round_scalars  merged over ranks -> TensorBoard, metrics.jsonl, one console line
    save           every `save_every` rounds, at the end, and on SIGTERM/SIGINT"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from unified.config import UserError, check_machine, to_yaml
from unified.pipeline import selective
from unified.pipeline.parquet_io import write_round, write_rows
from unified.pipeline.phases import build_round_data
from unified.pipeline.plan import RoundPlan, RunState, groups, plan_round
from unified.run import measure, metrics
from unified.run.components import Components, build_components, check_inputs, close, phase_engine, save
from unified.run.consolidation import consolidate_round
from unified.run.phase5 import Phase5Result, train_on_tasks
from unified.run.plots import plot_run
from unified.run.runlog import FolderGuard, RunLock, RunLog, check_run_folder, memory_stats
from unified.run.stopping import StopRequest
from unified.schema import TrainConfig
from unified.trainer.checkpoint import rng_state, saved_progress, set_rng_state
from unified.trainer.distributed import all_gather, all_reduce_int, cpu_has_bf16
from unified.trainer.engine import SamplingConfig, engine_creations
from unified.trainer.update_stats import UpdateStats
from unified.types import Rollout

log = logging.getLogger("unified")


def train(cfg: TrainConfig) -> int:
    """Run the configured rounds; returns the process exit code. `cfg`: the run's one typed
    config, validated (`config.load_config`): every stage reads its fields, and every checkpoint
    keeps it as YAML (`config.to_yaml`)."""
    inputs = check_inputs(cfg, to_yaml(cfg))  # bad input fails here, before the run folder is touched
    done = finished(cfg, inputs)
    if done:  # a finished run asked again (a driver rerun after a cut): no engine, no evaluation again
        if _is_main():
            print(done, flush=True)  # the run's log is not open yet: nothing in the folder is touched
        return 0
    check_machine(cfg, inputs.model_path)
    if _is_main():  # an earlier run in the folder: continue it (--resume) or refuse, never move it
        check_run_folder(cfg.output_dir, cfg.trainer.resume)
    guard = FolderGuard(cfg.output_dir, enabled=_is_main())
    lock = RunLock(cfg.output_dir, enabled=_is_main())  # a second process on this folder stops here
    runlog = RunLog(cfg.output_dir, enabled=_is_main())
    try:
        run = build_components(cfg, inputs)
        try:
            _announce(run, runlog)
            state = run.start_state  # the run's learning state: one value, replaced once a round
            with StopRequest() as stop:
                for r in range(run.start_round, cfg.trainer.rounds + 1):
                    state, going = run_round(run, state, runlog, r, stop)
                    if not going:
                        return stop.exit_code
            _finish(run, state, runlog)
            runlog.image("summary", run.out_dir / "tensorboard" / "summary.png", cfg.trainer.rounds)  # Images tab
            return 0
        finally:
            close(run)
    except BaseException as exc:  # a failed run leaves the folder as it found it (unless it checkpointed)
        runlog.close()
        lock.release()  # before the guard: a lock file this run created goes with the rest
        if guard.restore() and not isinstance(exc, UserError):
            print(f"the run failed before its first checkpoint: {cfg.output_dir} is left as it was", file=sys.stderr)
        raise
    finally:
        runlog.close()
        lock.release()


def finished(cfg: TrainConfig, inputs) -> str | None:
    """What says the run in `cfg.output_dir` has nothing left to do, or None: its checkpoint
    covers every round and, when the run evaluates (`trainer.eval_every`), the final
    evaluation of those very weights on these very problems is on disk."""
    if inputs.resume is None:
        return None
    saved_round, version = saved_progress(inputs.resume)
    if saved_round < cfg.trainer.rounds:
        return None
    final = Path(cfg.output_dir) / "eval" / "eval_results.json"
    if cfg.trainer.eval_every > 0:
        try:
            result = json.loads(final.read_text())
        except (OSError, ValueError):
            return None
        if result.get("version") != version or set(result.get("per_problem") or {}) != {p.problem_id for p in inputs.problems}:
            return None
    return (
        f"the run in {cfg.output_dir} is finished: its checkpoint covers round {saved_round} of {cfg.trainer.rounds}"
        + (f" and {final} holds the final evaluation of its weights (version {version})" if cfg.trainer.eval_every > 0 else "")
        + f"; --rounds {saved_round + 1} or more continues it"
    )


def run_round(run: Components, state: RunState, runlog: RunLog, r: int, stop: StopRequest) -> tuple[RunState, bool]:
    """One round: plan, tasks, measure, update, state, metrics, save. -> (the state after it,
    False when a stop signal ended the run after a checkpoint)."""
    start, rng_at_start = time.perf_counter(), rng_state()
    if hasattr(run.executor, "forget"):  # executor.reuse_results: each distinct call runs once a round
        run.executor.forget()
    plan = plan_round(state, run.cfg, [p.problem_id for p in run.problems], r)  # every lever's choice, once
    with runlog.phase(r, "phase_1_4") as t14:
        data, measured = make_tasks(run, plan)  # and the round's one measurement: the start weights
        all_data = publish_tasks(run, plan, replace(data, pass_at_1=measured.pass_at_1))
    if _stop_requested(stop):  # nothing trained yet this round: save the state it started from
        set_rng_state(rng_at_start)
        save(run, state, r - 1)
        return state, False
    with runlog.phase(r, "phase_5") as t5:
        result, rows = update_policy(run, plan, data)
    if plan.consolidate:  # found answers become greedy answers
        result = consolidate_round(run, state.targets, data, result)
    state = state.after(plan, data, result)
    scalars = round_scalars(run, plan, all_data, result, measured, rows)
    scalars.update(
        {
            "tasks/found_total": all_reduce_int(len(state.found), "max"),
            "time/phase_1_4": t14["seconds"],
            "time/phase_5": t5["seconds"],
            "time/round": time.perf_counter() - start,
        }
    )
    state = state.evaluated(scalars["compute/total_s"], scalars["eval/pass@1"]) if "eval/pass@1" in scalars else state
    scalars.update(measure.fit(run, state.eval_history, {k: v for k, v in scalars.items() if k.startswith("compute/")}))
    _report(run, runlog, r, scalars, all_data, rows)
    stopping = _stop_requested(stop)
    if r % run.cfg.trainer.save_every == 0 or r == run.cfg.trainer.rounds or stopping:
        save(run, state, r)
    return state, not stopping


def make_tasks(run: Components, plan: RoundPlan):
    """Phases 1-4 on the plan's problems, then the round's measurement on the same engine (the
    start weights): this rank's RoundData and what was measured."""
    with _bar(f"round {plan.round_index} phases 1-4", 4, run) as bar, phase_engine(run) as engine:
        data = build_round_data(run.problems, engine, run.executor, run.cfg.pipeline, plan, lambda *_: bar.update())
        return data, measure.measure_round(run, plan, data, engine)


def publish_tasks(run: Components, plan: RoundPlan, data):
    """Every rank's RoundData merged (with the measured pass@1), written as Parquet by rank 0."""
    all_data = metrics.merge_rounds(all_gather(data))
    if run.dist.is_main:
        write_round(run.out_dir / f"round_{plan.round_index}", all_data, measure.hidden_counts(all_data.problems))
    log.info("round %d: %d tasks kept of %d candidates", plan.round_index, len(all_data.tasks), len(all_data.candidate_tasks))
    return all_data


def round_scalars(run: Components, plan: RoundPlan, data, result: Phase5Result, measured, rows) -> dict:
    """The round's metrics in one call: pipeline, rollouts, the update, selection, what was measured,
    consolidation, the sandbox, the aggregator and engine, memory, compute (`data`: every rank's)."""
    signal = selective.problems_with_signal(groups(data.tasks, result.rollouts))  # this rank's
    scalars = {
        **metrics.pipeline_metrics(data),
        **metrics.rollout_metrics(rows),
        **metrics.train_metrics(all_gather(result.train)),
        "train/reused_groups": all_reduce_int(result.reused_groups, "sum"),
        "train/replayed_groups": all_reduce_int(result.replayed_groups, "sum"),
        **metrics.selection_metrics(all_gather((len(plan.problems), len(plan.skipped), len(signal)))),
        **measured.scalars,
        **result.consolidation,
        **metrics.executor_metrics(run.executor),
        **metrics.state_metrics(run.aggregator, run.engine, memory_stats()),
        **metrics.colocation_metrics(run.learner.colocation),
        **measure.compute_scalars(run),
        "time/push": result.train.push_s,
        **{f"time/phase_5_{k}": s for k, s in result.seconds.items()},
    }
    if run.dist.world_size > 1:
        scalars["engine/ranks_agree"] = _engines_agree(run)
    return scalars


def update_policy(run: Components, plan: RoundPlan, data) -> tuple[Phase5Result, list[Rollout]]:
    """Phase 5: rollouts, rewards and updates on this rank's tasks; every rank's rollout rows."""
    r, result = plan.round_index, Phase5Result((), UpdateStats(), {})
    if all_reduce_int(len(data.tasks), "sum") == 0:
        log.warning("round %d: no valid tasks, phase 5 skipped", r)
    else:
        with _bar(f"round {r} phase 5", None, run) as bar, phase_engine(run) as engine:
            result = train_on_tasks(data, run.learner.on(engine), run.executor, run.cfg.pipeline, plan, bar.update)
    rows = [row for part in all_gather(list(result.rollouts)) for row in part]
    if run.dist.is_main:
        write_rows(run.out_dir / f"round_{r}", "rollouts", [asdict(row) for row in rows])
    log.info("round %d: phase 5 on %d rollouts, %d optimizer step(s)", r, len(rows), result.train.steps)
    gc.collect()  # free between rounds; the engine stays
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result, rows


def _report(run: Components, runlog: RunLog, r: int, scalars: dict, data, rows: list[Rollout]) -> None:
    runlog.scalars(r, scalars)
    if run.dist.is_main:
        metrics.append_jsonl(run.out_dir / "metrics.jsonl", {"round": r, **scalars})
        for row in rows[: run.cfg.trainer.log_samples]:
            runlog.text(r, f"samples/{row.kind}", f"**task** `{row.task_id}`  reward {row.reward}\n\n```\n{row.completion}\n```")
        for task in data.tasks[: run.cfg.trainer.log_samples]:
            runlog.text(r, f"tasks/{task.kind}", f"```\n{task.prompt}\n```\n\n**gold**: `{task.gold}`")
    log.info(metrics.summary_line(r, run.cfg.trainer.rounds, scalars, algorithm=run.cfg.algorithm.adv_estimator))


def _announce(run: Components, runlog: RunLog) -> None:
    runlog.open_tensorboard(run.start_round)
    if run.dist.is_main:
        metrics.truncate_jsonl(run.out_dir / "metrics.jsonl", run.start_round)  # rounds a killed run did not checkpoint
    flat = {k: str(v) for k, v in _flatten(OmegaConf.to_container(OmegaConf.create(run.config_yaml))).items()}
    runlog.hparams(flat, metrics=("eval/pass@1", "eval/final_pass@1", "reward/mean", "losses/total"))
    weights = f" (weights from checkpoint {run.resumed_from})" if run.resumed_from else ""
    log.info(
        "run %s: %s on model %s%s, %d problems over %d rank(s), engine %s (engine creations: %d)",
        run.out_dir,
        run.cfg.algorithm.adv_estimator,
        metrics.model_label(run.cfg),
        weights,
        len(run.all_problem_ids),
        run.dist.world_size,
        run.cfg.rollout.backend,
        engine_creations(),
    )
    log.info(
        "compute dtype %s (model.dtype=%s%s): policy %s, engine %s%s",
        run.dtype,
        run.cfg.model.dtype,
        _dtype_reason(run),
        "under autocast, float32 master weights" if run.policy.autocast else "as is",
        run.dtype,
        ", compiled (rollout.compile)" if getattr(run.engine, "compiled", False) else "",
    )
    if run.cfg.pipeline.seed_programs == "canonical":
        log.info(
            "pipeline.seed_programs=canonical: each problem's reference solution is added to the model's own "
            "programs to build tasks from (the embedded tiny model writes noise); pipeline.seed_programs=none turns it off"
        )
    log.info(metrics.legend_line())
    if run.start_round > run.cfg.trainer.rounds:
        log.info("the checkpoint already covers round %d of %d: nothing to run", run.start_round - 1, run.cfg.trainer.rounds)


def _dtype_reason(run: Components) -> str:
    if run.cfg.model.dtype != "auto" or run.dist.device.type == "cuda":
        return ""
    if run.cfg.trainer.deterministic:
        return "; trainer.deterministic keeps float32"
    return "; this CPU has bf16 units" if cpu_has_bf16() else "; this CPU has no bf16 units"


def _finish(run: Components, state: RunState, runlog: RunLog) -> None:
    before = state.eval_history[0][1] if state.eval_history else None  # the first evaluated round's start
    final = measure.final_evaluation(run, state, runlog) if run.cfg.trainer.eval_every > 0 else None
    if run.dist.is_main and (run.out_dir / "metrics.jsonl").exists():
        png = run.out_dir / "tensorboard" / "summary.png"
        plot_run(run.out_dir / "metrics.jsonl", png, final_pass_at_1=final.pass_at_1 if final else None)
        log.info("summary plot: %s", png)
    log.info("done: version %d, engine creations %d, logs in %s", run.aggregator.version, engine_creations(), run.out_dir)
    if final is not None:  # the last line a user reads
        log.info(measure.verdict(before, final.pass_at_1, final.scored))


def _engines_agree(run: Components) -> float:
    """1.0 when every rank's engine answers a fixed greedy probe identically (same weights)."""
    with phase_engine(run) as engine:
        probe = engine.generate(["def add(a, b):"], SamplingConfig(n=1, temperature=0.0, max_tokens=8, seed=0))[0][0]
    answers = all_gather((probe.token_ids, [round(x, 4) for x in probe.logprobs], probe.version))
    return float(all(a == answers[0] for a in answers))


def _stop_requested(stop: StopRequest) -> bool:
    return all_reduce_int(int(stop.requested), "max") == 1  # every rank stops together


def _bar(desc: str, total: int | None, run: Components):
    return tqdm(total=total, desc=desc, disable=None if run.dist.is_main else True, leave=False)


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
