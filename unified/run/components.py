"""Everything the round loop holds for the whole run, built ONCE, and its checkpoints.

    check_inputs(cfg)      problems, checkpoint, model, verl names: read and checked
    build_components(cfg)  process group -> problems (this rank's share) -> tokenizer ->
                           policy (FSDP2) -> ONE engine -> executor -> aggregator ->
                           the learner (phase 5's update: `run/phase5.py`),
                           restored from a checkpoint when `trainer.resume` finds one
    save(c, round)         HF-format weights + optimizer + aggregator + RNG + config
    phase_engine(c)        the engine a phase uses: the resident one, metered (the old
                           design, a fresh engine per phase, lives in bench/restart_mode.py)

`cfg` is the run's one typed config (`schema.TrainConfig`, built once by `config.validate`).
"""

from __future__ import annotations

import logging
import os
import random
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed

from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.load import BenchmarkError, load_problems
from unified.errors import UserError
from unified.models.resolve import load_tokenizer, resolve_model_path

from unified.pipeline.plan import RunState, merge_ranks
from unified.run.colocate import Colocation, resolve_sleep
from unified.run.phase5 import Learner
from unified.run.telemetry import ComputeLedger, MeteredEngine
from unified.sandbox.executor import Executor
from unified.sandbox.executors import build_executor
from unified.schema import TrainConfig
from unified.trainer import checkpoint as ckpt
from unified.trainer.aggregator import Aggregator, build_aggregator
from unified.trainer.distributed import DistInfo, all_gather, init_distributed, resolve_dtype
from unified.trainer.engine import Engine, SamplingConfig, build_engine_from_config
from unified.trainer.losses import check_algorithm
from unified.trainer.policy import Policy, build_policy_from_config
from unified.types import Problem

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger("unified")


@dataclass(frozen=True)
class Components:
    cfg: TrainConfig
    dist: DistInfo
    problems: tuple[Problem, ...]  # this rank's problems (expected outputs filled)
    all_problem_ids: tuple[str, ...]
    tokenizer: PreTrainedTokenizerBase
    policy: Policy
    engine: Engine | None  # the resident engine (None in restart mode)
    executor: Executor
    aggregator: Aggregator
    learner: Learner  # phase 5's update: aggregator, algorithm, colocation, reference policy, ledger
    config_yaml: str  # the typed config as YAML (config.to_yaml): what checkpoints keep (config.yaml)
    out_dir: Path
    start_round: int  # first round to run (1-based)
    resumed_from: Path | None
    ledger: ComputeLedger  # device-seconds and tokens per role, cumulative
    dtype: str = "float32"  # the compute dtype model.dtype resolved to (policy and engine alike)
    # what the run had learned when it started (a checkpoint's, else empty): the loop holds the state from here
    # (pipeline/plan.py RunState) and hands it to `save`; nothing here changes during the run
    start_state: RunState = field(default_factory=RunState)

    @property
    def checkpoint_dir(self) -> Path:
        return self.out_dir / "checkpoints"


def seed_everything(seed: int, deterministic: bool) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)


@dataclass(frozen=True)
class Inputs:
    """What the user asked for, read and checked before anything is built or written."""

    problems: tuple  # every selected problem (expected outputs not yet filled)
    model_path: str  # a local HF folder the engine loads: the checkpoint's model when resuming
    resume: Path | None
    policy_path: str  # what the policy loads: the base model under LoRA (plus the checkpoint's adapter)
    adapter_dir: Path | None  # the checkpoint's LoRA adapter when resuming with LoRA
    config_yaml: str  # the typed config as YAML (config.to_yaml): checkpoints keep it


def check_inputs(cfg: TrainConfig, config_yaml: str) -> Inputs:
    """Problem selection, checkpoint, model and the algorithm's verl names: every mistake
    here is one clear line (UserError) before the run folder is touched or an engine starts."""

    b = cfg.benchmark
    try:
        problems = load_problems(b.name, b.source, b.problems, list(b.problem_ids))
        resume = ckpt.find_resume(Path(cfg.output_dir) / "checkpoints", cfg.trainer.resume)
        check_algorithm(cfg.algorithm)
    except (BenchmarkError, ValueError) as exc:
        raise UserError(str(exc)) from None
    world = int(os.environ.get("WORLD_SIZE", 1))
    if len(problems) < world:
        raise UserError(
            f"{len(problems)} problem(s) for {world} ranks: select at least one problem per rank (--problems {world})"
        )
    return Inputs(tuple(problems), *_model_paths(cfg, resume), config_yaml)


def _model_paths(cfg: TrainConfig, resume: Path | None) -> tuple:
    """(engine model, resume, policy model, LoRA adapter): a resumed run loads the
    checkpoint's model; under LoRA the policy loads the base model plus the adapter."""

    lora = cfg.tuning.method == "lora"
    base = resolve_model_path(cfg.model.path) if resume is None or lora else None
    model_path = str(resume / "model") if resume else base
    adapter_dir = None
    if resume is not None and lora:
        adapter_dir = resume / "adapter"
        if not (adapter_dir / "adapter_model.safetensors").exists():
            raise UserError(
                f"checkpoint {resume} has no LoRA adapter (it was trained with tuning.method != lora): resume it with the tuning it was trained with"
            )
    return model_path, resume, base if lora else model_path, adapter_dir


def build_components(cfg: TrainConfig, inputs: Inputs) -> Components:

    t = cfg.trainer
    info = init_distributed(t.device)  # before the engine: vLLM reuses this process group
    seed_everything(cfg.seed + info.rank, t.deterministic)
    out_dir, resume, model_path = Path(cfg.output_dir), inputs.resume, inputs.model_path
    if resume is None and t.resume == "auto":
        log.info("--resume auto: no checkpoint in %s, starting at round 1", out_dir / "checkpoints")
    try:
        executor = build_executor(cfg.executor)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    problems = tuple(with_expected_outputs(inputs.problems[info.rank :: info.world_size], executor.run_batch))
    all_ids = tuple(p.problem_id for p in inputs.problems)
    tokenizer = load_tokenizer(model_path)
    dtype = resolve_dtype(cfg.model.dtype, info.device.type, t.deterministic)
    try:
        policy = build_policy_from_config(
            cfg.model, inputs.policy_path, info.device, tuning=cfg.tuning, adapter_dir=inputs.adapter_dir, dtype=dtype
        )
    except ValueError as exc:  # e.g. a checkpoint's adapter that does not match the tuning config
        raise UserError(str(exc)) from None
    rollout = cfg.rollout
    planned = len(problems) * rollout.n * t.rounds  # this rank's sampled completions, for rollout.compile=auto
    engine = resident_engine(rollout, model_path, dtype, cfg.seed + info.rank, planned)
    ref_policy = reference_policy(cfg, info.device, dtype) if cfg.algorithm.use_kl_loss else None
    aggregator = build_aggregator(cfg.algorithm, policy, snapshot_dir=out_dir / "snapshots")
    ledger = ComputeLedger()
    start, state = _restore(resume, aggregator, engine, ledger, info.rank) if resume is not None else (1, RunState())
    colocation = Colocation(engine, resolve_sleep(rollout.sleep_between_phases, rollout.backend))
    learner = Learner(aggregator, cfg.algorithm, engine, tokenizer.pad_token_id, t.update_weights, colocation, ref_policy, ledger)
    return Components(
        cfg,
        info,
        problems,
        all_ids,
        tokenizer,
        policy,
        engine,
        executor,
        aggregator,
        learner,
        inputs.config_yaml,
        out_dir,
        start,
        resume,
        ledger,
        dtype,
        state,
    )


def _restore(resume: Path, aggregator, engine, ledger, rank: int) -> tuple[int, RunState]:
    """The checkpoint's optimizer, aggregator, compute ledger and RNG state, in place;
    -> (the first round to run, the run's learning state: `RunState.from_dict`)."""
    state, optimizer_state = ckpt.load_checkpoint(resume)
    if "compute" in state:
        ledgers = state["compute"]
        ledger.load_state_dict(ledgers[rank] if rank < len(ledgers) else ledgers[0])
    aggregator.load_optimizer_state_dict(optimizer_state)
    aggregator.load_state_dict(state["aggregator"])
    if engine is not None:
        engine.version = aggregator.version  # it loaded these very weights from the checkpoint
    ckpt.set_rng_state(state["rng"])
    start = int(state["round"]) + 1
    log.info("resumed from %s: continuing at round %d (version %d)", resume, start, aggregator.version)
    return start, RunState.from_dict(state)


def reference_policy(cfg: TrainConfig, device, dtype: str):
    """The KL reference: the configured model as it was before any training (a resumed run
    too), frozen."""

    return build_policy_from_config(cfg.model, resolve_model_path(cfg.model.path), device, trainable=False, dtype=dtype)


def resident_engine(rollout, model_path: str, dtype: str, seed: int, planned_samples: int = 0):
    """The process's one engine, built once and warmed up."""

    engine = build_engine_from_config(rollout, model_path, dtype=dtype, seed=seed, planned_samples=planned_samples)
    warm_up(engine)
    return engine


def warm_up(engine) -> None:
    """vLLM's first generate pays one-off set-up (seconds on CPU): do it here, not in round 1."""

    for temperature in (0.0, 1.0):
        engine.generate(["def f(x):"], SamplingConfig(n=2, temperature=temperature, max_tokens=4, seed=0))


def save(c: Components, state: RunState, round_index: int) -> Path | None:
    """A checkpoint of the run after `round_index`: weights, optimizer, aggregator, RNG, and the
    learning state `state` (`RunState.to_dict`, every rank's; collective: every rank calls it)."""

    optimizer_state = c.aggregator.optimizer_state_dict()  # gathered on every rank
    ledgers = all_gather(c.ledger.state_dict())  # each rank's own compute, restored per rank
    learned = merge_ranks(all_gather(state.to_dict()))  # every rank's problems
    state_dict = c.policy.full_state_dict()  # adapters merged: what transformers and vLLM load
    adapter = c.policy.adapter_state()
    if c.dist.rank != 0:
        return None

    def write_model(folder: Path) -> None:
        c.policy.write_pretrained(folder, state_dict, c.tokenizer)
        if adapter is not None:
            c.policy.write_adapter(folder.parent / "adapter", adapter)

    folder = ckpt.save_checkpoint(
        c.checkpoint_dir,
        round_index,
        write_model=write_model,
        optimizer_state=optimizer_state,
        state={"aggregator": c.aggregator.state_dict(), "world_size": c.dist.world_size, "compute": ledgers, **learned},
        config_yaml=c.config_yaml,
        keep=c.cfg.trainer.keep_checkpoints,
    )
    log.info("checkpoint: %s", folder)
    return folder


@contextmanager
def phase_engine(c: Components):
    """The engine for one phase: the one resident engine, metered, weights already in it.
    (bench/restart_mode.py swaps this for the old design: a fresh engine per phase.)"""

    yield MeteredEngine(c.engine, c.ledger)


def close(c: Components) -> None:
    """vLLM first (it tears the process group down with it), then the sandbox pool."""
    try:
        if c.engine is not None:
            c.engine.close()
    finally:
        c.executor.close()

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
