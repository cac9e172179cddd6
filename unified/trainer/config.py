"""The trainer's config groups: `model`, `rollout`, `algorithm`, `tuning` and `trainer`.

Frozen dataclasses whose fields are the keys of their Hydra group (configs/<group>/*.yaml
hold values only) and whose `__post_init__` refuses a bad value with one line naming it.
Torch-free and pipeline-free: a trainer module that reads its config loads nothing else of
the project (`unified/schema.py` gathers these with the pipeline's and the executor's).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from unified.types import SamplingConfig

TUNING_METHODS = ("full", "lora", "top_layers")
ZERO_VARIANCE = ("drop", "keep")
DTYPES = ("auto", "float32", "bfloat16", "float16")
ENGINE_BACKENDS = ("vllm_cpu", "vllm", "hf")  # trainer.engine.ENGINES (tests/config/test_config_keys.py checks they agree)
DEVICES = ("auto", "cpu", "cuda")


COMPILE_CHOICES = (None, "auto", "true", "false")
COMPILE_PAYS_FROM = 1100  # sampled completions that repay vLLM-cpu's compile (RolloutConfig.compile_choice)


def _refuse(group: str, problems: dict) -> None:
    """One ValueError naming every `key: what it must be` whose check failed."""
    failed = [f"{group}.{key} {rule}" for key, rule in problems.items() if rule]
    if failed:
        raise ValueError("; ".join(failed))


def _must(ok: bool, rule: str, value) -> str | None:
    return None if ok else f"must be {rule}, got {value!r}"


@dataclass(frozen=True)
class ModelConfig:
    # smollm2 (the default run's: SmolLM2-135M-Instruct, offline) | tiny | None (the embedded tiny model) | a local folder | a hub id
    path: Optional[str] = "smollm2"
    dtype: str = "auto"  # auto: float32 on CPU, bfloat16 on CUDA
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    max_new_tokens: int = 192  # generation budget per completion (programs, inputs, rollouts); SmolLM2's programs mostly fit

    def __post_init__(self):
        _refuse(
            "model",
            {
                "dtype": _must(self.dtype in DTYPES, f"one of {DTYPES}", self.dtype),
                "max_new_tokens": _must(self.max_new_tokens >= 1, ">= 1", self.max_new_tokens),
            },
        )


@dataclass(frozen=True)
class RolloutConfig:
    backend: str = "vllm_cpu"  # a name in trainer.engine.ENGINES
    # samples per task prompt in phase 5 (the group size; also phase 1's K, configs/pipeline). 8 since 2026-11-27
    # (issue 37): the tune sweep's gain after 3 rounds equalled 16's at 0.47x the generated tokens
    # (docs/results/sweep_2026-11-27.json); every result file made before then used 16 (add rollout.n=16 to rerun one)
    n: int = 8
    temperature: float = 0.8  # 1.0 is hot for a 135M model (sampled pass@1 a quarter of greedy)
    top_p: float = 1.0
    max_tokens: int | None = None  # per completion; None: follows model.max_new_tokens (schema.derive)
    max_model_len: int = 1024
    kv_cache_gib: float = 1.0
    gpu_memory_utilization: float = 0.4
    tensor_parallel_size: int = 1
    retries: int = 3
    retry_backoff_s: float = 0.5
    # vLLM's sleep mode during phase 5's update (unified/run/colocate.py): null = on for
    # rollout=vllm on CUDA, off otherwise (hf and vllm_cpu have nothing to free)
    sleep_between_phases: Optional[bool] = None
    # vLLM's torch.compile path for the served model: true | false | null (the backend's own
    # default: compiled on CUDA, eager on CPU) | auto: on vllm_cpu, compile when the run's planned
    # samples (rounds x problems x n) repay the start cost (`compile_choice`), else as null. On CPU
    # compiling generates ~12-14% faster on SmolLM2 for ~50 s at every engine start (vLLM's compile
    # cache did not shorten it; docs/performance.md); the hf backend ignores it
    compile: Optional[str] = "auto"

    def __post_init__(self):
        _refuse(
            "rollout",
            {
                "backend": _must(self.backend in ENGINE_BACKENDS, f"one of {ENGINE_BACKENDS}", self.backend),
                "n": _must(self.n >= 1, ">= 1", self.n),
                "temperature": _must(self.temperature >= 0, ">= 0", self.temperature),
                "top_p": _must(0 < self.top_p <= 1, "in (0, 1]", self.top_p),
                "max_tokens": _must(self.max_tokens is None or self.max_tokens >= 1, ">= 1", self.max_tokens),
                "max_model_len": _must(self.max_model_len >= 1, ">= 1", self.max_model_len),
                "kv_cache_gib": _must(self.kv_cache_gib > 0, "> 0", self.kv_cache_gib),
                "gpu_memory_utilization": _must(0 < self.gpu_memory_utilization <= 1, "in (0, 1]", self.gpu_memory_utilization),
                "tensor_parallel_size": _must(self.tensor_parallel_size >= 1, ">= 1", self.tensor_parallel_size),
                "retries": _must(self.retries >= 0, ">= 0", self.retries),
            },
        )

        if isinstance(self.compile, bool):  # a bool from Python; the config gives "true"/"True" (read in any case)
            object.__setattr__(self, "compile", str(self.compile).lower())
        _refuse(
            "rollout", {"compile": _must(self._compile in COMPILE_CHOICES, f"one of {COMPILE_CHOICES[1:]} or null", self.compile)}
        )

    @property
    def _compile(self) -> str | None:
        return None if self.compile is None else str(self.compile).lower()

    def compile_choice(self, planned_samples: int) -> bool | None:
        """What the engine is told (`build_engine(compile=...)`; None: its own default).
        `auto` compiles vllm_cpu when the run's sampled completions would save more than the
        start cost: ~12 % of ~0.38 s per SmolLM2 completion (phase 1 of a 100-problem round,
        800 completions in ~300 s) is ~0.045 s each, against ~50 s of compiling:
        `COMPILE_PAYS_FROM` completions, about 1.4 such rounds."""
        if self._compile == "auto":
            return True if self.backend == "vllm_cpu" and planned_samples >= COMPILE_PAYS_FROM else None
        return None if self._compile is None else self._compile == "true"

    def sampling(self, seed: int | None = None) -> SamplingConfig:
        """Phase 5's sampling: this config's fields of the same names."""
        if self.max_tokens is None:
            raise ValueError(
                "rollout.max_tokens is None: it follows model.max_new_tokens and TrainConfig fills it "
                "(schema.derive): build the config as a TrainConfig, or give RolloutConfig(max_tokens=...)"
            )
        return SamplingConfig(**{f.name: getattr(self, f.name) for f in fields(SamplingConfig) if f.name != "seed"}, seed=seed)


@dataclass(frozen=True)
class AlgorithmConfig:
    """Advantages, loss, optimizer and batching. The loss and advantage keys are verl's
    (`core_algos` registry names); `trainer/losses.py` reads them from this class."""

    adv_estimator: str = "grpo"  # grpo | rloo | reinforce_plus_plus | ... (verl's registry)
    norm_adv_by_std_in_grpo: bool = True
    gamma: float = 1.0
    policy_loss: str = "vanilla"  # verl policy-loss registry name
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    clip_ratio_c: float = 3.0  # dual-clip lower bound for negative advantages
    loss_agg_mode: str = "token-mean"
    entropy_coeff: float = 0.0
    # the supervised term on found answers (rejection-sampling fine-tuning / expert iteration): each problem's newest
    # answer that passed its visible example (this round's or an earlier one's) trains beside the groups with this
    # fixed advantage on every token, under the same clip (trainer/update.py `trainable`); 0: off. 1.0 (chosen
    # before any run, not tuned) is part of the default since 2026-11-28 (docs/discovery.md)
    sft_coef: float = 1.0
    # consolidation (trainer/consolidate.py): after each round's update, each found problem's one answer is trained by
    # plain NLL, outside the clip, until greedy decoding reproduces it (every token the argmax by this margin, in
    # logits, under teacher forcing) or after this many passes; 0: off. 8 is the default since 2026-11-29 (tune split:
    # +0.054 over the same recipe without it at matched tokens, docs/discovery.md)
    consolidate_passes: int = 8
    consolidate_margin: float = 1.0
    # targets per optimizer step: a pass over 18 targets at 16 a step made 1-2 steps, and 8 passes held 2 of 18 at the
    # margin (tune split, round 1, 2026-11-28); smaller steps give a pass more of them
    consolidate_batch: int = 4
    zero_variance: str = "drop"  # drop | keep: a group whose answers all got one reward (no gradient under GRPO)
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    lr: float = 1e-4  # the tune-split sweep: at 1e-5 (full fine-tuning recipes) nothing moves in 3 rounds (docs/results)
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0
    ppo_epochs: int = 1
    mini_batch_size: Optional[int] = None  # per-rank samples per optimizer step; None: the product below
    micro_batch_size: int = 8  # samples per forward/backward
    accum_steps: int = 2  # micro-batches per gradient contribution
    share_prompts: bool = True  # a micro-batch's rows with one prompt run it once (policy._answer_states; world size 1 only)
    logprobs_from_hidden: bool = True  # project only real answer positions, in place (trainer/vocab.py); false: full logits
    reuse_frozen_prefix: bool = (
        True  # top_layers: a recomputed answer trains from its frozen blocks' kept output (trainer/frozen_prefix.py)
    )
    update_steps: int = 2  # contributions per optimizer step (version bump + push)
    max_staleness: int = (
        16  # drop samples generated more than this many versions ago (phase 1's reused groups age through a round)
    )
    keep_last_versions: int = 0  # weight snapshots kept on disk

    def __post_init__(self):
        object.__setattr__(self, "betas", tuple(self.betas))
        for key in ("micro_batch_size", "accum_steps", "update_steps", "ppo_epochs"):
            if getattr(self, key) < 1:
                raise ValueError(f"algorithm.{key} must be >= 1, got {getattr(self, key)!r}")
        if self.zero_variance not in ZERO_VARIANCE:
            raise ValueError(f"algorithm.zero_variance must be one of {ZERO_VARIANCE}, got {self.zero_variance!r}")
        _refuse(
            "algorithm",
            {
                key: _must(getattr(self, key) >= 0, ">= 0", getattr(self, key))
                for key in (
                    "lr",
                    "weight_decay",
                    "grad_clip",
                    "kl_loss_coef",
                    "sft_coef",
                    "max_staleness",
                    "keep_last_versions",
                    "consolidate_passes",
                    "consolidate_margin",
                )
            },
        )
        if self.consolidate_batch < 1:
            raise ValueError(f"algorithm.consolidate_batch must be >= 1, got {self.consolidate_batch!r}")
        if self.mini_batch_size not in (None, self.samples_per_step):
            raise ValueError(
                f"algorithm.mini_batch_size={self.mini_batch_size} but micro_batch_size x accum_steps x "
                f"update_steps = {self.micro_batch_size}x{self.accum_steps}x{self.update_steps} = {self.samples_per_step}"
            )

    @property
    def samples_per_step(self) -> int:
        """Samples per optimizer step, per rank: micro_batch_size x accum_steps x update_steps."""
        return self.micro_batch_size * self.accum_steps * self.update_steps

    @property
    def steps_per_generation(self) -> int:
        """Optimizer steps' worth of samples one generation makes: trained `ppo_epochs` times,
        none of them is older than `max_staleness` versions at its last step."""
        return max(1, (self.max_staleness + 1) // self.ppo_epochs)


@dataclass(frozen=True)
class TuningConfig:
    """Which weights train (trainer/tuning.py)."""

    method: str = "top_layers"  # full | lora | top_layers
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0  # dropout makes training log-probs differ from the engine's
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    trainable_layers: int = 4  # top_layers only

    def __post_init__(self):
        object.__setattr__(self, "target_modules", tuple(str(m) for m in self.target_modules))
        if self.method not in TUNING_METHODS:
            raise ValueError(f"tuning.method must be one of {TUNING_METHODS}, got {self.method!r}")
        if self.lora_r < 1 or self.trainable_layers < 1:
            raise ValueError("tuning.lora_r and tuning.trainable_layers must be >= 1")


@dataclass(frozen=True)
class TrainerConfig:
    rounds: int = 2
    save_every: int = 1  # checkpoint every K rounds (and at the end, and on SIGTERM/SIGINT)
    keep_checkpoints: int = 3
    resume: str = "none"  # none | auto | PATH
    eval_every: int = 1  # pass@1 on hidden tests every E rounds (0: never)
    device: str = "auto"  # auto | cpu | cuda
    gpus: Optional[str] = None  # e.g. "0,1": sets CUDA_VISIBLE_DEVICES
    deterministic: bool = False  # bit-reproducible CPU mode (exact resume checks)
    log_samples: int = 4
    verbose: bool = False
    update_weights: bool = True  # false: the no-training control
    pass_at_k: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "pass_at_k", tuple(self.pass_at_k))
        _refuse(
            "trainer",
            {
                "device": _must(self.device in DEVICES, f"one of {DEVICES}", self.device),
                "keep_checkpoints": _must(self.keep_checkpoints >= 1, ">= 1", self.keep_checkpoints),
                "eval_every": _must(self.eval_every >= 0, ">= 0 (0: never)", self.eval_every),
                "log_samples": _must(self.log_samples >= 0, ">= 0", self.log_samples),
                "pass_at_k": _must(all(k >= 1 for k in self.pass_at_k), "whole numbers >= 1", list(self.pass_at_k)),
            },
        )
