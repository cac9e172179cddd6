"""The resident rollout engine: built once per process, weights pushed into it in place.

`build_engine` picks a backend from `ENGINES` and returns an `Engine` (`engine_base`: what
all backends share). A new backend is one module with an `Engine` subclass plus one line
in `ENGINES`.

Creating an engine is expensive and, for vLLM, tied to the process group, so a process
gets one: a second `build_engine` raises unless `allow_another=True` (bench code does
that on purpose for its "restart" baseline). `engine_creations()` counts them all.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import TYPE_CHECKING

from unified.trainer.engine_base import Engine, Prompt, PushResult, Weights, WeightsRejected
from unified.trainer.engine_hf import HFEngine
from unified.trainer.engine_vllm import VLLMEngine
from unified.types import SamplingConfig

if TYPE_CHECKING:
    from unified.trainer.config import RolloutConfig

__all__ = [
    "ENGINES",
    "BACKENDS",
    "Engine",
    "Prompt",
    "PushResult",
    "SamplingConfig",
    "Weights",
    "WeightsRejected",
    "build_engine",
    "build_engine_from_config",
    "current_engine",
    "engine_creations",
]

log = logging.getLogger("unified")

# backend name -> (class, extra constructor arguments)
ENGINES: dict[str, tuple[type[Engine], dict]] = {
    "vllm_cpu": (VLLMEngine, {"on_cpu": True}),
    "vllm": (VLLMEngine, {"on_cpu": False}),
    "hf": (HFEngine, {}),
}
BACKENDS = tuple(ENGINES)

_CREATIONS = 0
_CURRENT: Engine | None = None


def engine_creations() -> int:
    """How many engines this process has built (the run logs it; it must stay 1)."""
    return _CREATIONS


def current_engine() -> Engine | None:
    """The engine this process built last, if any (lets tests and tools share it)."""
    return _CURRENT


def build_engine(
    backend: str,
    model_path: str,
    *,
    dtype: str = "auto",
    max_model_len: int = 1024,
    seed: int = 0,
    kv_cache_gib: float = 1.0,
    gpu_memory_utilization: float = 0.4,
    tensor_parallel_size: int = 1,
    retries: int = 3,
    retry_backoff_s: float = 0.5,
    sleep_between_phases: bool | None = None,
    compile: bool | None = None,
    allow_another: bool = False,
) -> Engine:
    """The process's engine. The process group must exist first (`init_distributed`).
    `sleep_between_phases`: vLLM on CUDA is built with sleep mode unless it is False
    (unified/run/colocate.py decides when it sleeps); other backends ignore it."""
    global _CREATIONS, _CURRENT
    if backend not in ENGINES:
        raise ValueError(f"unknown rollout backend {backend!r}; choose one of {', '.join(ENGINES)}")
    if _CREATIONS and not allow_another:
        raise RuntimeError(
            f"an engine already exists in this process (creations={_CREATIONS}); the engine is "
            "resident: reuse it, or pass allow_another=True to create another on purpose"
        )
    cls, extra = ENGINES[backend]
    options = dict(
        kv_cache_gib=kv_cache_gib,
        gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size,
        sleep_between_phases=sleep_between_phases,
        compile=compile,
    )
    engine = cls(
        model_path,
        dtype=dtype,
        seed=seed,
        max_model_len=max_model_len,
        retries=retries,
        retry_backoff_s=retry_backoff_s,
        **extra,
        **{k: v for k, v in options.items() if k in cls.OPTIONS},
    )
    _CREATIONS += 1
    _CURRENT = engine
    log.info("engine created: backend=%s model=%s (creations=%d)", backend, model_path, _CREATIONS)
    return engine


def build_engine_from_config(
    rollout: RolloutConfig, model_path: str, *, dtype: str, seed: int, planned_samples: int = 0, allow_another: bool = False
) -> Engine:
    """The round loop's entry point: the rollout group's engine keys (the ones that are not
    sampling's) go to `build_engine` as they are, but `compile`, resolved for a run that
    will sample `planned_samples` completions (`RolloutConfig.compile_choice`)."""
    sampling = {f.name for f in fields(SamplingConfig)}
    options = {f.name: getattr(rollout, f.name) for f in fields(rollout) if f.name not in sampling | {"backend"}}
    options["compile"] = rollout.compile_choice(planned_samples)
    return build_engine(rollout.backend, model_path, dtype=dtype, seed=seed, allow_another=allow_another, **options)
