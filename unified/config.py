"""Config: compose `configs/` with Hydra's compose API and check what a user can get wrong.

We use `hydra.compose` rather than `@hydra.main` so that the same `train(cfg)` is callable
from tests, and so that every mistake becomes one `UserError` line instead of a Hydra
traceback. Hydra's own output-dir/logging machinery is not used: the run writes under
`output_dir` itself.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unified.cli import FLAG_TO_KEY
from unified.errors import UserError
from unified.models.resolve import looks_local
from unified.schema import TrainConfig, register  # each group's class is torch-free: composing loads no torch

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
GROUPS = ("model", "rollout", "algorithm", "tuning", "benchmark", "pipeline", "executor", "trainer", "experiment")
# keys that were renamed: the old name is refused with one line naming the new one
RENAMED = {
    "pipeline.task_types": "pipeline.kinds",
    "pipeline.balance_types": "pipeline.balance_kinds",
    "pipeline.max_tasks_per_type_per_problem": "pipeline.max_tasks_per_kind_per_problem",
}


def _group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def _explain_hydra_error(exc: Exception, overrides: Sequence[str]) -> str:
    msg = " ".join(str(exc).split())
    merging = re.match(r"Error merging override (\S+?)=(.*)", msg)
    if merging and exc.__cause__ is not None:  # the schema refused the value (a type error)
        reason = str(exc.__cause__).splitlines()[0]
        return f"{merging.group(1)}={merging.group(2)!r} is not valid: {reason}"
    missing = re.search(r"Could not find '([\w/]+)/(\w+)'", msg) or re.search(r"In '(\w+)': Could not find '(\w+)'", msg)
    for group in GROUPS:
        for ov in overrides:
            if ov.startswith(f"{group}=") and group in msg and ("Could not find" in msg or "Could not load" in msg):
                value = ov.split("=", 1)[1]
                return f"unknown {group} {value!r}: choose one of {', '.join(_group_options(group))}"
    if missing:
        return f"unknown config option {missing.group(0)}"
    key = re.search(r"Could not override '([^']+)'", msg) or re.search(r"Key '([^']+)' is not in struct", msg)
    if key:
        return _unknown_key(key.group(1), overrides)
    if "EQUAL" in msg or "mismatched input" in msg or "no viable alternative" in msg or "extraneous input" in msg:
        bad = next((o for o in overrides if o.split("=", 1)[0] in msg or o in msg), overrides[-1] if overrides else "")
        return f"malformed override {bad!r}: write overrides as key=value, e.g. trainer.rounds=3"
    return f"bad config override: {msg[:300]}"


def _unknown_key(key: str, overrides: Sequence[str]) -> str:
    """A key Hydra does not know. A new `+key` would be ignored by the code, so point at the
    existing key of that name instead (`rounds=1` -> `trainer.rounds=1` or `--rounds 1`)."""
    value = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+") == key), "VALUE")
    old = next((k for k in RENAMED if key in (k, k.rsplit(".", 1)[-1])), None)  # with or without its group
    if old is not None:
        return f"{old} was renamed: use {RENAMED[old]}" + (f"={value}" if value != "VALUE" else " instead")
    leaf, group = key.rsplit(".", 1)[-1], key.split(".", 1)[0]
    if group in GROUPS and "." in key and (leaf in ("name", "type") or value in _group_options(group)):
        # `algorithm.name=rloo`: a group's option chosen as if it were a key
        return f"unknown config key {key!r}: {group} is a config group, chosen as {group}=NAME (one of {', '.join(_group_options(group))})"
    known = [k for k in _default_keys() if k.rsplit(".", 1)[-1] == leaf and k != key]
    flags = {k: f"--{f.replace('_', '-')}" for f, k in _flag_keys().items()}
    if known:
        hints = " or ".join(f"{k}={value}" + (f" (or {flags[k]} {value})" if k in flags else "") for k in known[:3])
        return f"unknown config key {key!r}: did you mean {hints}?"
    return f"unknown config key {key!r}: check the spelling (python train_unified.py --cfg job lists every key)"


def _default_keys() -> list[str]:
    """Every key of the default config, dotted (`trainer.rounds`, ...)."""
    register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = OmegaConf.to_container(compose(config_name="train"), resolve=False)

    def walk(tree, prefix=""):
        for k, v in tree.items():
            yield from walk(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]

    return list(walk(cfg))


def _flag_keys() -> dict:
    return FLAG_TO_KEY


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose `configs/train.yaml` with Hydra overrides (`key=value`, `group=option`). It
    only reads: nothing is validated and no folder is touched (`load_config` validates)."""
    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            cfg = compose(config_name="train", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise UserError(_explain_hydra_error(exc, list(overrides))) from None
    return cfg


def load_config(overrides: Sequence[str] = ()) -> tuple[DictConfig, TrainConfig]:
    """The composed config and the run's one typed config, validated once here (`validate`)
    and passed on to `train` (`to_yaml` of it is what `--cfg` prints and checkpoints keep)."""
    composed = compose_config(overrides)
    return composed, validate(composed)


def _positive_int(value, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{flag} must be a whole number >= 1 (got {value!r}): e.g. {flag} 1")


def typed(cfg: DictConfig) -> TrainConfig:
    """The whole config as ONE frozen `schema.TrainConfig` (`OmegaConf.to_object`): each
    group the frozen dataclass its stage runs with, its `__post_init__` checks run; a
    mistake is one UserError line."""
    added = _added_keys(cfg)
    if added:  # added with `+`: no code would read it
        raise UserError(_unknown_key(added[0], []))
    try:
        return OmegaConf.to_object(cfg)
    except (ValueError, TypeError, OmegaConfBaseException) as exc:
        raise UserError(" ".join(str(exc).split("\n")[0].split())) from None


def _added_keys(cfg: DictConfig) -> list[str]:
    """Keys of the root or of a group that its schema class does not declare."""

    def extra(node, prefix: str) -> list[str]:
        declared = {f.name for f in dataclasses.fields(OmegaConf.get_type(node))}
        return [f"{prefix}{k}" for k in sorted(set(node) - declared)]

    groups = [k for k in cfg if isinstance(cfg[k], DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(cfg[k]))]
    return extra(cfg, "") + [key for g in groups for key in extra(cfg[g], f"{g}.")]


def validate(cfg: DictConfig) -> TrainConfig:
    """Checks that need no heavy imports (`load_config` runs them once per run). Returns the
    run's one typed config (`typed`)."""
    run_cfg = typed(cfg)
    t, b = run_cfg.trainer, run_cfg.benchmark
    _positive_int(t.rounds, "--rounds")
    _positive_int(t.save_every, "--save-every")
    if b.problems is not None and not b.problem_ids:
        _positive_int(b.problems, "--problems")
    if t.resume not in ("none", "auto") and not Path(t.resume).expanduser().exists():
        raise UserError(f"--resume {t.resume!r}: no such checkpoint; use auto, none, or an existing checkpoint directory")
    path = run_cfg.model.path
    if path is not None:
        if looks_local(path) and not Path(str(path)).expanduser().exists():
            raise UserError(
                f"model path {path!r} does not exist: give a local model directory or a Hugging Face model id (model.path=...)"
            )
    _check_shapes(run_cfg)
    check_writable(Path(run_cfg.output_dir))
    return run_cfg


def _check_shapes(cfg: TrainConfig) -> None:
    """Answer shapes need an engine that decodes in a grammar: rollout=hf refuses them."""
    p = cfg.pipeline
    shaped = [k for k in p.constrain if k in p.kinds or (k == "inputs" and p.needs_triples)]
    if cfg.rollout.backend == "hf" and shaped:
        raise UserError(
            f"rollout=hf cannot decode answers in a shape (pipeline.constrain={list(p.constrain)}): "
            "use rollout=vllm_cpu or rollout=vllm, or set pipeline.constrain=[]"
        )


def check_machine(cfg: TrainConfig, model_dir: str) -> None:
    """What this machine and this model must offer the config: a GPU when one is asked for,
    the vLLM package for a vLLM rollout, and a context that fits the model. Checked before
    anything starts, so none of these ends as a traceback from deep inside torch or vLLM."""
    import torch

    t, rollout = cfg.trainer, cfg.rollout
    has_cuda = torch.cuda.is_available()
    if t.gpus is not None and not has_cuda:
        raise UserError(f"--gpu / trainer.gpus={t.gpus}: no CUDA GPU is visible on this machine: leave it out to run on the CPU")
    if t.device == "cuda" and not has_cuda:
        raise UserError(
            "trainer.device=cuda but no CUDA GPU is visible on this machine: use trainer.device=auto or trainer.device=cpu"
        )
    backend = rollout.backend
    if backend == "vllm" and not has_cuda:
        raise UserError("rollout=vllm needs a CUDA GPU: on this machine use rollout=vllm_cpu (the default) or rollout=hf")
    if backend in ("vllm", "vllm_cpu") and importlib.util.find_spec("vllm") is None:
        raise UserError(f"rollout={backend} needs the vllm package, which is not installed: run make install, or use rollout=hf")
    limit = model_positions(model_dir)
    if backend in ("vllm", "vllm_cpu") and limit is not None and rollout.max_model_len > limit:
        raise UserError(
            f"rollout.max_model_len={rollout.max_model_len} does not fit the model, which has {limit} positions "
            f"(max_position_embeddings): set rollout.max_model_len={limit} or less"
        )
    budgets = {
        "rollout.max_tokens": rollout.max_tokens,
        "pipeline.program_max_tokens": cfg.pipeline.program_max_tokens,
        "pipeline.input_max_tokens": cfg.pipeline.input_max_tokens,
    }
    for key, value in budgets.items():
        if value >= rollout.max_model_len:
            raise UserError(
                f"{key}={value} leaves no room for the prompt in rollout.max_model_len={rollout.max_model_len}: "
                f"lower {key} or raise rollout.max_model_len"
            )


def model_positions(model_dir: str) -> int | None:
    """The model's context length (max_position_embeddings), None when unknown."""
    try:
        value = json.loads((Path(model_dir) / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def check_writable(path: Path) -> None:
    """The folder can be written; a folder this check had to create is removed again, so
    a run that fails later leaves no trace of itself."""
    path = Path(path)
    created = [p for p in [path, *path.parents] if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write_test_{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise UserError(
            f"output directory {str(path)!r} is not writable ({exc.strerror}): choose another with --output-dir DIR"
        ) from None
    finally:
        for folder in created:  # deepest first
            try:
                folder.rmdir()
            except OSError:
                pass


def to_yaml(cfg: TrainConfig) -> str:
    """The run's typed config as YAML (what `--cfg` prints and checkpoints keep as config.yaml):
    every value resolved, the derived keys (None in the schema) included."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
