"""Every config key is honest: each one, set to a non-default but valid value, goes through
`--cfg job` (composition, the schema's checks, the printed config) and the run's start-up
checks (`load_config`, `check_inputs`, `check_machine`) without a traceback, and shows up in
the typed config the run reads. A new key without a value here fails the test. A value a
machine legitimately refuses (a GPU on a CPU-only machine) must be one `error:` line.

`tests/e2e/test_loop.py::test_a_run_with_many_non_default_keys_trains` runs one real round with
several of them at once."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from unified.config import RENAMED, _default_keys, check_machine, compose_config, load_config, to_yaml, typed
from unified.errors import UserError
from unified.run.components import check_inputs

REPO = Path(__file__).resolve().parents[2]
BASE = ["model=tiny"]  # fast, offline; `model.path` below is its other spelling
SOURCE_IDS = ("Mbpp/2", "Mbpp/3", "Mbpp/4")  # the cases read these from a small file, not all of MBPP+ each time

# key -> a valid value that differs from the default (with model=tiny)
VALUES = {
    "run_name": "every_key", "seed": "7",
    "model.path": "tiny", "model.dtype": "float32", "model.gradient_checkpointing": "true",
    "model.trust_remote_code": "true", "model.max_new_tokens": "48",
    "rollout.backend": "hf", "rollout.n": "4", "rollout.temperature": "0.6", "rollout.top_p": "0.95",
    "rollout.max_tokens": "32", "rollout.max_model_len": "512", "rollout.kv_cache_gib": "0.5",
    "rollout.gpu_memory_utilization": "0.5", "rollout.tensor_parallel_size": "2", "rollout.retries": "1",
    "rollout.retry_backoff_s": "0.1", "rollout.sleep_between_phases": "false",
    "rollout.compile": "true",
    "algorithm.adv_estimator": "rloo", "algorithm.norm_adv_by_std_in_grpo": "false", "algorithm.gamma": "0.99",
    "algorithm.policy_loss": "gspo", "algorithm.clip_ratio_low": "0.1", "algorithm.clip_ratio_high": "0.28",
    "algorithm.clip_ratio_c": "2.0", "algorithm.loss_agg_mode": "seq-mean-token-mean", "algorithm.entropy_coeff": "0.001",
    "algorithm.zero_variance": "keep", "algorithm.sft_coef": "0.5", "algorithm.consolidate_passes": "3", "algorithm.consolidate_margin": "0.5", "algorithm.consolidate_batch": "2", "algorithm.use_kl_loss": "true", "algorithm.kl_loss_coef": "0.01",
    "algorithm.kl_loss_type": "mse", "algorithm.lr": "5e-5", "algorithm.weight_decay": "0.01",
    "algorithm.betas": "[0.9,0.95]", "algorithm.grad_clip": "0.5", "algorithm.ppo_epochs": "2",
    "algorithm.mini_batch_size": "32", "algorithm.micro_batch_size": "4", "algorithm.accum_steps": "1", "algorithm.share_prompts": "false",
    "algorithm.logprobs_from_hidden": "false", "algorithm.reuse_frozen_prefix": "false",
    "algorithm.update_steps": "1", "algorithm.max_staleness": "4", "algorithm.keep_last_versions": "2",
    "tuning.method": "lora", "tuning.lora_r": "8", "tuning.lora_alpha": "16", "tuning.lora_dropout": "0.05",
    "tuning.target_modules": "[q_proj,v_proj]", "tuning.trainable_layers": "2",
    "benchmark.name": "humaneval", "benchmark.source": "{other_source}", "benchmark.problems": "3",
    "benchmark.problem_ids": "[Mbpp/2,Mbpp/3]",
    "pipeline.num_programs": "2", "pipeline.program_temperature": "0.5", "pipeline.program_max_tokens": "40",
    "pipeline.num_proposed_inputs": "1", "pipeline.input_temperature": "0.5", "pipeline.input_max_tokens": "40",
    "pipeline.evaluate_baseline": "false", "pipeline.keep_passing_visible": "true",
    "pipeline.induction_needs_visible": "false", "pipeline.seed_programs": "none", "pipeline.kinds": "[solve,deduction]",
    "pipeline.max_tasks_per_kind_per_problem": "2", "pipeline.max_tasks": "6", "pipeline.balance_kinds": "true",
    "pipeline.induction_shown": "2", "pipeline.induction_reward": "fraction", "pipeline.solve_reward": "graded",
    "pipeline.format_penalty": "0.0", "pipeline.format_penalty_when": "always", "pipeline.max_output_chars": "500", "pipeline.stop_at_answer": "false",
    "pipeline.selective_keep": "0.5", "pipeline.selective_floor": "0.5",
    "pipeline.constrain": "[deduction]", "pipeline.mix": "[solve:0.5,deduction:0.5]", "pipeline.solve_source": "both",
    "pipeline.agreement_min_votes": "4", "pipeline.discovery_n": "16", "pipeline.discovery_rounds": "2", "pipeline.replay": "true",
    "executor.backend": "ray", "executor.workers": "1", "executor.timeout_s": "1.0", "executor.memory_mb": "256",
    "executor.cpu_s": "3.0", "executor.max_output_bytes": "4096", "executor.banned_modules": "[socket,ctypes]",
    "executor.banned_calls": "[eval,exec]", "executor.ray_address": "auto", "executor.ray_max_retries": "1", "executor.wall_s": "5.0",
    "executor.reuse_results": "false", "executor.allow_shared_runtime": "true",
    "trainer.rounds": "3", "trainer.save_every": "2", "trainer.keep_checkpoints": "1", "trainer.resume": "auto",
    "trainer.eval_every": "2", "trainer.device": "cpu", "trainer.gpus": "'0'", "trainer.deterministic": "true",
    "trainer.log_samples": "1", "trainer.verbose": "true", "trainer.update_weights": "false", "trainer.pass_at_k": "[1,2]",
}  # fmt: skip  # table: one config group's keys a line or two
# what this machine may refuse, with the line it must say
MACHINE_REFUSALS = {"trainer.gpus": "no CUDA GPU is visible"}


@pytest.fixture
def _env_kept():
    """main() sets CUDA_VISIBLE_DEVICES from trainer.gpus: put the environment back."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_every_schema_key_has_a_value_here():
    keys = set(_default_keys()) - {"output_dir"}  # every case sets its own
    assert keys == set(VALUES), f"missing: {sorted(keys - set(VALUES))}; stale: {sorted(set(VALUES) - keys)}"


def _start_up(overrides: list[str]):
    """What `train` checks before anything is built: -> the typed config."""
    _, cfg = load_config(overrides)
    inputs = check_inputs(cfg, to_yaml(cfg))
    check_machine(cfg, inputs.model_path)
    return cfg


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict:
    """Two small benchmark files (a few MBPP+ rows) and the base overrides reading one."""
    import gzip
    import json

    folder = tmp_path_factory.mktemp("benchmark")
    with gzip.open(REPO / "unified/data/MbppPlus.jsonl.gz", "rt") as f:
        rows = [line for line in f if json.loads(line)["task_id"] in SOURCE_IDS]
    for name in ("source", "other_source"):
        (folder / f"{name}.jsonl").write_text("".join(rows))
    base = [*BASE, f"benchmark.source={folder / 'source.jsonl'}", f"output_dir={folder / 'out'}"]
    return {
        "base": base,
        "other_source": str(folder / "other_source.jsonl"),
        "default": OmegaConf.create(to_yaml(typed(compose_config(base)))),
    }  # the printed default: derived keys filled


@pytest.mark.parametrize("key", list(VALUES))
def test_a_non_default_value_passes_cfg_job_and_the_start_up_checks(key, small, capsys, _env_kept):
    from train_unified import main

    overrides = [*small["base"], f"{key}={VALUES[key].format(**small)}"]
    code = main(["--cfg", "job", *overrides])
    out, err = capsys.readouterr()
    assert code == 0, err
    printed = OmegaConf.select(OmegaConf.create(out), key)
    assert printed != OmegaConf.select(small["default"], key), printed  # the value arrived
    if key == "trainer.gpus":
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # set before anything touches CUDA
    try:
        _start_up(overrides)
    except UserError as exc:  # only what this machine may refuse, as one line
        assert key in MACHINE_REFUSALS and MACHINE_REFUSALS[key] in str(exc), str(exc)
        assert "\n" not in str(exc)


def _field(cfg, key: str):
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_typed_config_reads_every_key_from_the_composed_one(small):
    """All values at once: each typed field holds what was composed (no key dropped on the way)."""
    overrides = [*small["base"], *(f"{k}={v.format(**small)}" for k, v in VALUES.items() if k != "algorithm.mini_batch_size")]
    composed = compose_config(overrides)
    cfg = typed(composed)
    for key in VALUES:
        value = OmegaConf.select(composed, key)
        expected = tuple(value) if OmegaConf.is_list(value) else value
        if key.startswith("executor.") and value is None:
            continue  # derived in ExecutorConfig.__post_init__
        assert _field(cfg, key) == expected, key


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_renamed_keys_are_refused_with_the_new_name(old, capsys):
    from train_unified import main

    assert main(["--cfg", "job", f"{old}=[solve]" if old.endswith("task_types") else f"{old}=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{old} was renamed: use {RENAMED[old]}=" in err[0], err


def test_invalid_values_are_one_line_at_start_up(small):
    cases = {
        "algorithm.adv_estimator=nope": "not known to verl",
        "algorithm.policy_loss=nope": "not known to verl",
        "algorithm.loss_agg_mode=nope": "not known to verl",
        "algorithm.kl_loss_type=nope": "not known to verl",
        "model.dtype=float64": "model.dtype must be one of",
        "trainer.device=tpu": "trainer.device must be one of",
        "rollout.backend=warp": "rollout.backend must be one of",
        "rollout.top_p=1.5": "rollout.top_p must be in (0, 1]",
        "rollout.n=0": "rollout.n must be >= 1",
        "trainer.pass_at_k=[0]": "trainer.pass_at_k must be",
        "algorithm.lr=-1": "algorithm.lr must be >= 0",
        "trainer.eval_every=-1": "trainer.eval_every must be >= 0",
    }
    for override, expected in cases.items():
        with pytest.raises(UserError, match=re.escape(expected)):
            _start_up([*small["base"], override])


def test_the_schema_names_the_engine_backends_there_are():
    from unified.schema import ENGINE_BACKENDS, TrainConfig
    from unified.trainer.engine import ENGINES

    assert set(ENGINE_BACKENDS) == set(ENGINES)
    assert dataclasses.is_dataclass(TrainConfig) and TrainConfig.__dataclass_params__.frozen
