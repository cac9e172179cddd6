"""Config composition: every group and option composes, flags map onto keys."""

import functools
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from unified.cli import parse_args
from unified.config import CONFIG_DIR, GROUPS, compose_config, load_config


def _options(group):
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def test_every_group_has_a_config_file():
    for group in GROUPS:
        assert _options(group), f"configs/{group}/ is empty"


@pytest.mark.parametrize("group", [g for g in GROUPS if g != "experiment"])
def test_every_option_of_every_group_composes(group, tmp_path):
    for option in _options(group):
        cfg, _ = load_config([f"{group}={option}", f"output_dir={tmp_path}"])  # validated too
        assert group in cfg and cfg[group] is not None
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves


def _leaves(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if key != "defaults":  # a file's own defaults list: what it builds on, not a value
            out.update(_leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


@pytest.mark.parametrize("option", _options("experiment"))
def test_experiments_compose(option, tmp_path):
    """Each experiment validates, and every value its file sets (its deltas, `# @package
    _global_`) is what the typed config holds: an experiment that silently lost a key (a
    missing package line, a renamed key) fails here."""
    raw = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "experiment" / f"{option}.yaml"))
    deltas = _leaves(raw)
    for entry in raw.get("defaults", []):  # `override /group: option`: that option's values, unless the file sets its own
        ((spec, chosen),) = entry.items()
        group = spec.split("/")[-1]
        picked = _leaves(OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / group / f"{chosen}.yaml")), f"{group}.")
        deltas = {**{k: v for k, v in picked.items() if "${" not in str(v)}, **deltas}
    assert deltas, f"experiment {option} sets nothing"
    composed, cfg = load_config([f"experiment={option}", f"output_dir={tmp_path}"])
    for key, value in deltas.items():
        typed_value = functools.reduce(getattr, key.split("."), cfg)
        assert (list(typed_value) if isinstance(typed_value, tuple) else typed_value) == value, key
        assert OmegaConf.select(composed, key) == value, key


def test_flags_map_onto_hydra_keys(tmp_path):
    _, overrides = parse_args(
        [
            "--benchmark",
            "humaneval",
            "--problems",
            "3",
            "--rounds",
            "5",
            "--save-every",
            "2",
            "--problem-id",
            "HumanEval/1",
            "--problem-id",
            "HumanEval/7",
            "--output-dir",
            str(tmp_path),
            "--gpu",
            "0,1",
            "algorithm.lr=0.001",
        ]
    )
    cfg = compose_config(overrides)
    assert cfg.benchmark.name == "humaneval"
    assert cfg.benchmark.problems == 3
    assert list(cfg.benchmark.problem_ids) == ["HumanEval/1", "HumanEval/7"]
    assert cfg.trainer.rounds == 5 and cfg.trainer.save_every == 2
    assert cfg.trainer.gpus == "0,1"
    assert cfg.algorithm.lr == 0.001
    assert Path(cfg.output_dir) == tmp_path


def test_cfg_job_prints_resolved_config(capsys, tmp_path):
    from train_unified import main

    assert main(["--cfg", "job", "--rounds", "7", f"--output-dir={tmp_path}"]) == 0
    printed = OmegaConf.create(capsys.readouterr().out)
    assert printed.trainer.rounds == 7
    assert set(GROUPS) - {"experiment"} <= set(printed.keys())


def test_the_config_is_one_frozen_typed_tree_with_each_group_its_schema_dataclass():
    import dataclasses

    from unified.config import typed
    from unified.schema import TrainConfig

    cfg = compose_config(["executor.timeout_s=1.5", "algorithm=rloo", "tuning=lora"])
    run_cfg = typed(cfg)
    assert type(run_cfg) is TrainConfig
    with pytest.raises(dataclasses.FrozenInstanceError):
        run_cfg.seed = 1
    for f in dataclasses.fields(TrainConfig):
        if dataclasses.is_dataclass(f.default_factory):
            group = getattr(run_cfg, f.name)
            assert type(group) is f.default_factory, f.name
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(group, dataclasses.fields(group)[0].name, None)
    # derived values follow the override: the schema holds the declared default (None), not
    # one derived from the default timeout when the schema was built
    assert cfg.executor.wall_s is None and run_cfg.executor.wall_s == 16.0
    assert run_cfg.algorithm.adv_estimator == "rloo" and run_cfg.tuning.method == "lora"
    assert run_cfg.tuning.target_modules == tuple(run_cfg.tuning.target_modules)
    # derived sizes: computed in one place, from the group's own fields
    a = run_cfg.algorithm
    assert a.samples_per_step == a.micro_batch_size * a.accum_steps * a.update_steps
    assert a.steps_per_generation == (a.max_staleness + 1) // a.ppo_epochs


def test_option_files_hold_only_schema_keys():
    import dataclasses

    from unified.schema import TrainConfig

    classes = {f.name: f.default_factory for f in dataclasses.fields(TrainConfig) if dataclasses.is_dataclass(f.default_factory)}
    for group, cls in classes.items():
        defaults = OmegaConf.structured(cls)
        for path in sorted((CONFIG_DIR / group).glob("*.yaml")):
            values = {k: v for k, v in OmegaConf.to_container(OmegaConf.load(path)).items() if k != "defaults"}
            assert set(values) <= set(defaults), f"{path.name}: keys outside {cls.__name__}"
