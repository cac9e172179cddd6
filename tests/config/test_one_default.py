"""One default per key: `TrainConfig()` built in Python IS the default run, on every key of every
group (`test_python_defaults_are_the_default_run`), and a YAML option file holds only what differs
from its group's default (`test_option_files_hold_only_differences`; experiments only what differs
from the default run). A key whose value follows from another group (derived, listed here so a new
one is a decision) is None in its class and in the YAML, and gets its value in ONE place,
`schema.derive` (run by `TrainConfig.__post_init__`, so Hydra's typed config and a `TrainConfig`
built in Python agree). A drift fails, naming the key."""

from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from unified.config import compose_config, typed
from unified.pipeline import config as pipeline_config
from unified.pipeline.config import PipelineConfig
from unified.schema import RolloutConfig, TrainConfig, TrainerConfig

# key -> the value it follows (schema.derive): the group size has ONE source, rollout.n; phase 1's
# programs per problem (pipeline.num_programs) follow it
DERIVED = {
    "pipeline": {
        "program_max_tokens",
        "input_max_tokens",
        "seed_programs",
        "kinds",
        "mix",
        "constrain",
        "num_programs",
        "program_temperature",
    },
    "rollout": {"max_tokens"},
    "trainer": set(),
}
CLASSES = {"pipeline": PipelineConfig, "rollout": RolloutConfig, "trainer": TrainerConfig}


def drift(run, cls, skip: set[str]) -> list[str]:
    """Keys where the class default is not what the run got."""
    default = cls()
    return [
        f"{f.name}: run {getattr(run, f.name)!r}, class {getattr(default, f.name)!r}"
        for f in fields(cls)
        if f.name not in skip and getattr(run, f.name) != getattr(default, f.name)
    ]


def class_defaults(cls, keys) -> dict:
    """The class defaults of `keys` that are not None (a derived key must have none)."""
    default = {f.name: f.default for f in fields(cls)}
    return {k: default[k] for k in keys if default[k] is not None}


def filled(run, cls) -> set[str]:
    """Keys None in the class that the run holds a value for: the derived ones."""
    return {f.name for f in fields(cls) if f.default is None and getattr(run, f.name) is not None}


CONFIGS = Path(__file__).resolve().parents[2] / "configs"
OPTION_FILES = sorted(p for p in CONFIGS.glob("*/*.yaml") if p.parent.name != "experiment")
EXPERIMENTS = sorted(CONFIGS.glob("experiment/*.yaml"))


def every_key(cfg) -> dict:
    """`cfg` (a TrainConfig) as dotted key -> value, every group's every field."""
    out = {}
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        out.update(
            {f"{f.name}.{g.name}": getattr(value, g.name) for g in fields(value)} if is_dataclass(value) else {f.name: value}
        )
    return out


def restated(values: dict, defaults: dict, prefix: str = "") -> list[str]:
    """The keys of a YAML body (`values`, nested) whose value is the default's (`defaults`: dotted)."""
    out = []
    for key, value in values.items():
        if key == "defaults":
            continue
        if isinstance(value, dict):
            out += restated(value, defaults, f"{prefix}{key}.")
        elif (tuple(value) if isinstance(value, list) else value) == defaults[f"{prefix}{key}"]:
            out.append(f"{prefix}{key}: {value!r}")
    return out


def test_python_defaults_are_the_default_run():
    """Every key of every group: what Python builds is what `python train_unified.py` runs with."""
    run, plain = every_key(typed(compose_config([]))), every_key(TrainConfig())
    assert run.keys() == plain.keys()
    assert len(run) > 100 and {k.split(".")[0] for k in run} >= {f.name for f in fields(TrainConfig) if "." not in f.name}
    assert [f"{k}: run {run[k]!r}, TrainConfig() {plain[k]!r}" for k in run if run[k] != plain[k]] == []


@pytest.mark.parametrize("path", OPTION_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_option_files_hold_only_differences(path):
    """A value an option file restates is a second default that can drift from the class's."""
    body = yaml.safe_load(path.read_text()) or {}
    assert restated(body, every_key(TrainConfig()), f"{path.parent.name}.") == []
    assert not body.get("defaults"), "an option file inherits from its class, not from another file"


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_experiments_hold_only_deltas(path):
    body = {k: v for k, v in (yaml.safe_load(path.read_text()) or {}).items() if not k.startswith("#")}
    assert restated(body, every_key(TrainConfig())) == []


def test_the_root_config_restates_nothing():
    assert set(yaml.safe_load((CONFIGS / "train.yaml").read_text())) == {"defaults"}


def test_a_restated_value_is_found():
    defaults = every_key(TrainConfig())
    assert restated({"rounds": 2, "save_every": 3}, defaults, "trainer.") == ["trainer.rounds: 2"]
    assert restated({"pipeline": {"replay": False}}, defaults) == ["pipeline.replay: False"]


def test_the_classes_are_the_default_config():
    composed = compose_config([])
    cfg = typed(composed)
    for group, cls in CLASSES.items():
        assert filled(getattr(cfg, group), cls) == DERIVED[group], f"{group}: a key became derived or stopped being one"
        assert drift(getattr(cfg, group), cls, DERIVED[group]) == []
        set_in_yaml = [k for k in DERIVED[group] if OmegaConf.select(composed, f"{group}.{k}") is not None]
        assert set_in_yaml == [], f"{group}: derived keys set in configs/ (schema.derive is their one place)"
    assert DERIVED["pipeline"] == set(pipeline_config.DERIVED)  # what `require_derived` checks


def test_a_derived_key_has_no_class_default():
    """A class default for a derived key would compete with `derive`: code built outside Hydra
    would silently run with it (the old `num_programs=4` while a run got `rollout.n=8`)."""
    for group, cls in CLASSES.items():
        assert class_defaults(cls, DERIVED[group]) == {}, f"{group}: give these None and let schema.derive fill them"


def _underived(cfg: TrainConfig, group: str):
    """`group` of `cfg` with its derived keys back to None (as a class builds it)."""
    return replace(getattr(cfg, group), **dict.fromkeys(DERIVED[group]))


@pytest.mark.parametrize(
    "overrides", [[], ["model=tiny"], ["model=hf", "rollout=hf"], ["rollout.n=5", "rollout.temperature=0.3"]]
)
def test_python_and_hydra_derive_in_one_place(overrides):
    """A TrainConfig built in Python from the run's other groups gets the run's derived values."""
    run = typed(compose_config(overrides))
    built = TrainConfig(model=run.model, rollout=_underived(run, "rollout"), pipeline=_underived(run, "pipeline"))
    for group, keys in DERIVED.items():
        for key in keys:
            assert getattr(getattr(built, group), key) == getattr(getattr(run, group), key), f"{group}.{key}"
    plain = TrainConfig()  # its own groups' defaults: the default run's (SmolLM2)
    assert plain.pipeline.num_programs == plain.rollout.n and plain.rollout.max_tokens == plain.model.max_new_tokens
    assert (plain.run_name, plain.output_dir) == ("mbpp", "logs/mbpp")
    assert TrainConfig(run_name="x").output_dir == "logs/x" and TrainConfig(output_dir="o").output_dir == "o"


def test_an_override_of_a_derived_key_wins():
    cfg = typed(compose_config(["pipeline.num_programs=4", "rollout.max_tokens=50"]))
    assert cfg.pipeline.num_programs == 4 and cfg.rollout.n == 8 and cfg.rollout.max_tokens == 50
    assert TrainConfig(pipeline=PipelineConfig(num_programs=3)).pipeline.num_programs == 3


def test_a_derived_key_left_unset_is_one_clear_error():
    with pytest.raises(ValueError, match=r"pipeline\.num_programs is None: .*TrainConfig.*PipelineConfig\(num_programs=\.\.\.\)"):
        PipelineConfig().require_derived()
    with pytest.raises(ValueError, match=r"rollout\.max_tokens is None: it follows model\.max_new_tokens"):
        RolloutConfig().sampling()


def test_the_group_size_has_one_source():
    cfg = typed(compose_config(["rollout.n=5"]))
    assert cfg.pipeline.num_programs == cfg.rollout.n == 5


def test_a_drift_is_named():
    run = PipelineConfig(max_tasks=7)
    assert drift(run, PipelineConfig, set()) == [f"max_tasks: run 7, class {PipelineConfig().max_tasks!r}"]
