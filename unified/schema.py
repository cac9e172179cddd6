"""The config's schema: one dataclass per Hydra group, and `TrainConfig` over them.

    composed = compose_config(["algorithm.lr=5e-5"])     # a DictConfig typed by TrainConfig
    run_cfg: TrainConfig = typed(composed)                # unified.config.typed: OmegaConf.to_object
    run_cfg.algorithm.samples_per_step                    # frozen, typed, derived sizes as properties

`configs/*.yaml` hold values only (option files and experiments only their deltas); these
classes hold the keys, types and defaults. Hydra checks every override against them when it
composes (an unknown key or a wrong type is an error there), and `OmegaConf.to_object` turns
the whole tree into one frozen `TrainConfig` whose groups are the frozen dataclasses their
stages run with, checks in `__post_init__` included: no hand-written mapping between YAML
and code. The run builds it once (`config.load_config`, which validates) and every stage reads its fields.
A key whose value follows from another group (`pipeline.num_programs` from `rollout.n`, the
budgets from `model.max_new_tokens`, ...) is None in its class and in the YAML, and gets its
value in one place: `derive`, which `TrainConfig.__post_init__` runs.
Each group lives beside its stage: the trainer's (`model`, `rollout`, `algorithm`,
`tuning`, `trainer`) in trainer/config.py, the pipeline's (`pipeline`, `benchmark`) in
pipeline/config.py, the executor's in sandbox/config.py; all three are torch-free, so
composing a config imports no torch, and this module only gathers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from unified.kinds import DEFAULT_MIX, SELF_PLAY, SOLVE
from unified.pipeline.config import INPUTS, TTRLVR_KINDS, BenchmarkConfig, PipelineConfig
from unified.sandbox.config import ExecutorConfig
from unified.trainer.config import (  # noqa: F401 - the groups' names, gathered here
    DEVICES,
    DTYPES,
    ENGINE_BACKENDS,
    TUNING_METHODS,
    ZERO_VARIANCE,
    AlgorithmConfig,
    ModelConfig,
    RolloutConfig,
    TrainerConfig,
    TuningConfig,
)


# A run's executor differs from a bare Executor's class defaults (tests, `unified.eval`: every call
# runs, a shared runtime is accepted): a training run remembers each distinct call's result within a
# round (sandbox/reuse.py) and refuses a pool without its own runtime copy (docs/sandbox.md) unless
# `executor.allow_shared_runtime=true`. The one place these two defaults of the `executor` group live.
RUN_EXECUTOR = {"reuse_results": True, "allow_shared_runtime": False}


def run_executor() -> ExecutorConfig:
    """The `executor` group's defaults: the class's, with `RUN_EXECUTOR`."""
    return ExecutorConfig(**RUN_EXECUTOR)


@dataclass(frozen=True)
class TrainConfig:
    """The root: what the run reads, typed and frozen (`config.typed`). Hydra composes into
    a writable node made from it (`schema_node`)."""

    run_name: str | None = None  # follows benchmark.name (derive)
    output_dir: str | None = None  # follows run_name: logs/<run_name> (derive)
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    tuning: TuningConfig = field(default_factory=TuningConfig)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    executor: ExecutorConfig = field(default_factory=run_executor)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def __post_init__(self):  # Hydra's `typed` and a TrainConfig built in Python alike get the derived keys
        for name, group in derive(self).items():
            object.__setattr__(self, name, group)


def schema_node() -> DictConfig:
    """`TrainConfig` as the node Hydra composes into. Each group is built from its class (the
    executor's with `RUN_EXECUTOR`), so it holds the declared defaults (`None` where `__post_init__` derives a value: an instance
    would hold the derived one, and an override of what it derives from would not reach it).
    Frozen classes make read-only nodes, which Hydra could not merge the YAML into: they are
    made writable here and are frozen again by `OmegaConf.to_object`."""
    node = OmegaConf.structured(TrainConfig)
    OmegaConf.set_readonly(node, False)
    for f in fields(TrainConfig):
        if is_dataclass(f.default_factory) or f.default_factory is run_executor:
            group = OmegaConf.structured(ExecutorConfig if f.default_factory is run_executor else f.default_factory)
            OmegaConf.set_readonly(group, False)
            if f.default_factory is run_executor:
                group.merge_with(RUN_EXECUTOR)
            node[f.name] = group
    return node


def derive(cfg: TrainConfig) -> dict:
    """The ONE place the derived keys get their values: each is None in its class (a competing
    class default would be what code built outside Hydra silently runs with) and follows from
    another group; a key already set (an override, e.g. pipeline.num_programs=4) is kept.
    -> {field name: the group with its derived keys filled, or the derived root value}."""
    model, rollout, pipeline = cfg.model, cfg.rollout, cfg.pipeline
    run_name = cfg.run_name if cfg.run_name is not None else cfg.benchmark.name
    output_dir = cfg.output_dir if cfg.output_dir is not None else f"logs/{run_name}"
    rollout = _fill(rollout, max_tokens=model.max_new_tokens)
    kinds = pipeline.kinds if pipeline.kinds is not None else tuple(task_kinds_for(model.path, rollout.backend))
    pipeline = _fill(
        pipeline,
        num_programs=rollout.n,
        program_temperature=rollout.temperature,  # the group size: rollout.n
        program_max_tokens=model.max_new_tokens,
        input_max_tokens=model.max_new_tokens,
        seed_programs=seed_programs_for(model.path),
        kinds=kinds,
        mix=tuple(task_mix_for(model.path, kinds)),
        constrain=tuple(constrain_for(rollout.backend)),
    )
    return {"run_name": run_name, "output_dir": output_dir, "rollout": rollout, "pipeline": pipeline}


def _fill(group, **values):
    """`group` with each key of `values` that it holds as None set (its checks run again)."""
    unset = {k: v for k, v in values.items() if getattr(group, k) is None}
    return replace(group, **unset) if unset else group


def seed_programs_for(model_path: str | None) -> str:
    """`pipeline.seed_programs`' derived value: the embedded tiny model writes noise, so its
    tasks also come from the canonical solutions."""
    return "canonical" if _tiny(model_path) else "none"


def _tiny(model_path: str | None) -> bool:
    return model_path in (None, "", "tiny")


def task_kinds_for(model_path: str | None, backend: str | None = None) -> list[str]:
    """`pipeline.kinds`' derived value: a real model trains on its benchmark prompts (`solve`,
    rewarded on the visible examples) and, where the engine decodes answers in their shapes (not
    on `rollout=hf`), on the self-play kinds built from its own programs; the embedded tiny
    model, which writes noise, on the self-play kinds built from canonical programs."""
    if _tiny(model_path):
        return list(SELF_PLAY)
    return [SOLVE] if backend == "hf" else list(DEFAULT_MIX)


def task_mix_for(model_path: str | None, kinds) -> list[str]:
    """`pipeline.mix`' derived value: for a real model, the shares of DEFAULT_MIX for the kinds
    in `pipeline.kinds`, when they are two or more and all in it (so `pipeline.kinds=[solve]` is
    solve alone); otherwise none: every kept task."""
    kinds = [str(k) for k in kinds]
    if _tiny(model_path) or len(kinds) < 2 or set(kinds) - set(DEFAULT_MIX):
        return []
    return [f"{k}:{DEFAULT_MIX[k]}" for k in kinds]


def constrain_for(backend: str | None) -> list[str]:
    """`pipeline.constrain`'s derived value: the self-play kinds' answers and phase 2's inputs
    in their shapes (kinds/shapes.py) where the engine can decode in a grammar (vLLM's
    structured outputs); nothing on the hf backend, which cannot."""
    return [] if backend == "hf" else [*TTRLVR_KINDS, INPUTS]


def register() -> None:
    """Store the schema as `schema` (the first entry of configs/train.yaml's defaults)."""
    ConfigStore.instance().store(name="schema", node=schema_node())
