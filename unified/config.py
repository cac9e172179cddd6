"""Config: compose `configs/` with Hydra's compose API and check what a user can get wrong.

We use `hydra.compose` rather than `@hydra.main` so that the same `train(cfg)` is callable
from tests, and so that every mistake becomes one `UserError` line instead of a Hydra
traceback. Hydra's own output-dir/logging machinery is not used: the run writes under
`output_dir` itself.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
GROUPS = ("model", "rollout", "algorithm", "benchmark", "pipeline", "executor", "trainer", "experiment")


class UserError(Exception):
    """Bad user input: printed as one line naming the problem and the fix, exit code 2."""


def _group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def _explain_hydra_error(exc: Exception, overrides: Sequence[str]) -> str:
    msg = " ".join(str(exc).split())
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
        return f"unknown config key {key.group(1)!r}: check the spelling (python train_unified.py --cfg job lists every key), or add a new key with +{key.group(1)}=VALUE"
    if "EQUAL" in msg or "mismatched input" in msg or "no viable alternative" in msg or "extraneous input" in msg:
        bad = next((o for o in overrides if o.split("=", 1)[0] in msg or o in msg), overrides[-1] if overrides else "")
        return f"malformed override {bad!r}: write overrides as key=value, e.g. trainer.rounds=3"
    return f"bad config override: {msg[:300]}"


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose `configs/train.yaml` with Hydra overrides (`key=value`, `group=option`)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            cfg = compose(config_name="train", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise UserError(_explain_hydra_error(exc, list(overrides))) from None
    validate(cfg)
    return cfg


def _positive_int(cfg: DictConfig, key: str, flag: str, allow_zero: bool = False) -> None:
    value = OmegaConf.select(cfg, key)
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        least = 0 if allow_zero else 1
        raise UserError(f"{flag} must be a whole number >= {least} (got {value!r}): e.g. {flag} {max(least, 1)}")


def validate(cfg: DictConfig) -> None:
    """Checks that need no heavy imports; called on every composed config."""
    _positive_int(cfg, "trainer.rounds", "--rounds")
    _positive_int(cfg, "trainer.save_every", "--save-every", allow_zero=True)
    if cfg.benchmark.problems is not None and not cfg.benchmark.problem_ids:
        _positive_int(cfg, "benchmark.problems", "--problems")
    resume = str(cfg.trainer.resume)
    if resume not in ("none", "auto") and not Path(resume).expanduser().exists():
        raise UserError(f"--resume {resume!r}: no such checkpoint; use auto, none, or an existing checkpoint directory")
    path = cfg.model.path
    if path is not None:
        looks_local = str(path).startswith((".", "/", "~")) or os.sep in str(path).rstrip(os.sep).split(os.sep, 1)[-1]
        if looks_local and not Path(str(path)).expanduser().exists():
            raise UserError(f"model path {path!r} does not exist: give a local model directory or a Hugging Face model id (model.path=...)")
    check_writable(Path(str(cfg.output_dir)))


def check_writable(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write_test_{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"output directory {str(path)!r} is not writable ({exc.strerror}): choose another with --output-dir DIR") from None


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
