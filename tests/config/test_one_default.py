"""One default per key: what `PipelineConfig()` and `TrainerConfig()` hold is what a run of
the default config gets, except the keys whose YAML value follows from another group (`${...}`:
derived, listed here so a new one is a decision). A drift between a YAML value and its class
default fails, naming the key."""

from dataclasses import fields

from omegaconf import OmegaConf

from unified.config import compose_config, typed
from unified.pipeline.config import PipelineConfig
from unified.schema import TrainerConfig

# key -> the value it follows (configs/pipeline/default.yaml): the group size has ONE source,
# rollout.n; phase 1's programs per problem (pipeline.num_programs) follow it
DERIVED = {"pipeline": {"program_max_tokens", "input_max_tokens", "seed_programs", "kinds", "mix", "constrain",
                        "num_programs", "program_temperature"}, "trainer": set()}  # fmt: skip


def derived_keys(composed, group: str) -> set[str]:
    node = composed[group]
    return {k for k in node if OmegaConf.is_interpolation(node, k)}


def drift(run, cls, skip: set[str]) -> list[str]:
    """Keys where the class default is not what the run got."""
    default = cls()
    return [f"{f.name}: run {getattr(run, f.name)!r}, class {getattr(default, f.name)!r}" for f in fields(cls)
            if f.name not in skip and getattr(run, f.name) != getattr(default, f.name)]  # fmt: skip


def test_the_classes_are_the_default_config():
    composed = compose_config([])
    cfg = typed(composed)
    for group, cls in (("pipeline", PipelineConfig), ("trainer", TrainerConfig)):
        assert derived_keys(composed, group) == DERIVED[group], f"{group}: a key became derived or stopped being one"
        assert drift(getattr(cfg, group), cls, DERIVED[group]) == []


def test_the_group_size_has_one_source():
    cfg = typed(compose_config(["rollout.n=5"]))
    assert cfg.pipeline.num_programs == cfg.rollout.n == 5


def test_a_drift_is_named():
    run = PipelineConfig(max_tasks=7)
    assert drift(run, PipelineConfig, set()) == [f"max_tasks: run 7, class {PipelineConfig().max_tasks!r}"]
