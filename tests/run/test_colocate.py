"""vLLM's sleep mode on one GPU, orchestrated by unified/run/colocate.py: the engine sleeps
before the policy's first forward of each optimizer step and wakes before the push, and
leaves `train_on_samples` awake. Checked here with the hf engine, whose sleep frees nothing
but keeps the state (asleep, it refuses to generate or take a push), wrapped in a recorder
that notes every sleep, forward, wake and push together with whether the engine slept."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.run.colocate import Colocation, resolve_sleep
from unified.schema import AlgorithmConfig
from unified.trainer.aggregator import Aggregator
from unified.trainer.engine import SamplingConfig
from unified.trainer.engine_hf import HFEngine
from unified.trainer.update import train_on_samples
from unified.types import Sample

CFG = AlgorithmConfig(micro_batch_size=2, accum_steps=1, update_steps=1, lr=1e-3)


class Recorder:
    """The engine, with every sleep / wake / push / generate noted as (event, asleep before it)."""

    def __init__(self, engine, events: list):
        self.engine, self.events = engine, events

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def _note(self, event: str):
        self.events.append((event, self.engine.asleep))

    def sleep(self):
        self._note("sleep")
        self.engine.sleep()

    def wake_up(self):
        self._note("wake")
        self.engine.wake_up()

    def push(self, weights, version, **kw):
        self._note("push")
        return self.engine.push(weights, version, **kw)

    def generate(self, prompts, sampling, shapes=None):
        self._note("generate")
        return self.engine.generate(prompts, sampling, shapes)


def assert_colocated_order(events: list) -> None:
    """Every forward runs with the engine asleep, every push and generate with it awake, and
    each optimizer step reads sleep -> forward(s) -> wake -> push."""
    for event, asleep in events:
        if event == "forward":
            assert asleep, f"the update started before the engine slept: {events}"
        if event in ("push", "generate"):
            assert not asleep, f"{event} while the engine was asleep: {events}"
    names = [e for e, _ in events]
    squeezed = [n for i, n in enumerate(names) if i == 0 or n != "forward" or names[i - 1] != "forward"]
    for i, name in enumerate(squeezed):
        if name == "push":
            assert squeezed[i - 3 : i] == ["sleep", "forward", "wake"], f"push not after sleep -> update -> wake: {squeezed}"


@pytest.fixture(scope="module")
def policy():
    from unified.trainer.distributed import init_distributed
    from unified.trainer.policy import build_policy

    info = init_distributed("cpu")
    return build_policy(str(default_model_dir()), device=info.device, dtype="float32")


@pytest.fixture(scope="module")
def hf_engine():
    return HFEngine(str(default_model_dir()), dtype="float32", seed=0, max_model_len=512, retries=0, retry_backoff_s=0.0)


def _recorded(policy, hf_engine, noted):
    """The engine behind a recorder, and the policy's forwards noted with the engine's state."""
    handle = policy.module.register_forward_pre_hook(lambda m, a: noted.append(("forward", hf_engine.asleep)))
    return Recorder(hf_engine, noted), handle


def _samples(engine, n: int) -> list[Sample]:
    groups = engine.generate(["def add(a, b):"], SamplingConfig(n=n, temperature=1.0, max_tokens=6, seed=3))
    return [Sample(c.prompt_token_ids, c.token_ids, c.logprobs, float(i % 2), "g", c.version) for i, c in enumerate(groups[0])]


def _train(policy, engine, turns, samples, update_steps: int = 1):
    cfg = replace(CFG, update_steps=update_steps)
    aggregator = Aggregator(policy, torch.optim.AdamW(policy.parameters(), lr=cfg.lr), cfg)
    aggregator.version = engine.version
    with turns.session():
        return train_on_samples(samples, aggregator, cfg, engine=engine, pad_token_id=0, turns=turns)


def test_sleep_update_wake_push_in_that_order(policy, hf_engine):
    noted: list = []
    engine, handle = _recorded(policy, hf_engine, noted)
    try:
        samples = _samples(engine, 4)
        colocation = Colocation(engine, enabled=True)
        stats = _train(policy, engine, colocation, samples)
        engine.generate(["x = 1"], SamplingConfig(n=1, max_tokens=2, seed=0))
    finally:
        handle.remove()
    assert stats.steps == 2
    names = [e for e, _ in noted]
    assert names.count("forward") >= 2  # a step's micro-batch is one forward, or two with a shared prompt
    squeezed = [n for i, n in enumerate(names) if n != "forward" or names[i - 1] != "forward"]
    assert squeezed == ["generate", "sleep", "forward", "wake", "push", "sleep", "forward", "wake", "push", "generate"]
    assert_colocated_order(noted)
    assert not hf_engine.asleep and hf_engine.version == stats.versions[-1]
    assert colocation.round_metrics() == {"engine/sleeps": 2}  # no CUDA here: no memory/gpu_update_gib
    assert colocation.round_metrics() == {"engine/sleeps": 0}  # counted per round


def test_the_order_check_fails_on_an_update_before_sleep(policy, hf_engine):
    class SleepsTooLate(Colocation):
        def updating(self):  # the forward runs first, the engine sleeps at the push's turn
            pass

        def pushing(self):
            if not self.engine.asleep:
                self.engine.sleep()
            super().pushing()

    noted: list = []
    engine, handle = _recorded(policy, hf_engine, noted)
    try:
        _train(policy, engine, SleepsTooLate(engine, enabled=True), _samples(engine, 2))
    finally:
        handle.remove()
    with pytest.raises(AssertionError, match="before the engine slept"):
        assert_colocated_order(noted)


def test_a_push_while_asleep_is_refused_and_caught(policy, hf_engine):
    class NeverWakes(Colocation):
        def pushing(self):
            pass

    noted: list = []
    engine, handle = _recorded(policy, hf_engine, noted)
    colocation = NeverWakes(engine, enabled=True)
    try:
        with pytest.raises(RuntimeError, match="asleep"):  # the engine rejects it; push_weights gives up
            _train(policy, engine, colocation, _samples(engine, 2))
    finally:
        handle.remove()
        hf_engine.wake_up()
    with pytest.raises(AssertionError, match="push while the engine was asleep"):
        assert_colocated_order(noted)
    assert hf_engine.healthy  # rejected up front: the served weights were never touched


def test_the_engine_leaves_awake_without_a_step_and_after_an_error(policy, hf_engine):
    colocation = Colocation(hf_engine, enabled=True)
    poisoned = [replace(s, reward=math.inf) if i == 0 else s for i, s in enumerate(_samples(hf_engine, 2))]
    stats = _train(policy, hf_engine, colocation, poisoned)  # a non-finite gradient: the step is skipped, no push
    assert stats.steps == 0 and stats.skipped_nonfinite == 1 and colocation.sleeps == 1 and not hf_engine.asleep

    def boom(module, args):
        raise ValueError("forward failed")

    handle = policy.module.register_forward_pre_hook(boom)
    try:
        with pytest.raises(ValueError, match="forward failed"):
            _train(policy, hf_engine, colocation, _samples(hf_engine, 2))
    finally:
        handle.remove()
    assert not hf_engine.asleep


def test_sleep_off_never_sleeps(policy, hf_engine):
    noted: list = []
    engine, handle = _recorded(policy, hf_engine, noted)
    try:
        colocation = Colocation(engine, enabled=False)
        assert _train(policy, engine, colocation, _samples(engine, 2)).steps == 1
    finally:
        handle.remove()
    assert "sleep" not in [e for e, _ in noted] and not any(asleep for _, asleep in noted)
    assert colocation.round_metrics() == {}


def test_an_engine_asleep_refuses_generate_and_push_then_wakes(policy, hf_engine):
    assert not hf_engine.frees_memory_asleep  # transformers has no sleep mode: a state only
    hf_engine.sleep()
    hf_engine.sleep()  # idempotent
    try:
        with pytest.raises(RuntimeError, match="asleep"):
            hf_engine.generate(["x"], SamplingConfig(n=1, max_tokens=2))
        pushes = hf_engine.pushes
        result = hf_engine.push(policy.named_full_weights(), hf_engine.version + 1)
        assert not result.ok and "asleep" in result.error and hf_engine.pushes == pushes and hf_engine.healthy
    finally:
        hf_engine.wake_up()
    hf_engine.wake_up()
    assert hf_engine.generate(["x"], SamplingConfig(n=1, max_tokens=2, seed=0))[0][0].token_ids


@pytest.mark.parametrize(
    "setting, backend, cuda, expected",
    [
        (None, "vllm", True, True),
        (None, "vllm", False, False),
        (None, "hf", True, False),
        (None, "vllm_cpu", False, False),
        (True, "hf", False, True),
        (False, "vllm", True, False),
    ],
)
def test_sleep_between_phases_resolves_on_for_cuda_vllm_only(setting, backend, cuda, expected):
    assert resolve_sleep(setting, backend, cuda) is expected


def test_build_engine_takes_every_engine_key_of_the_rollout_group():
    """build_engine_from_config hands each RolloutConfig key that is not sampling's to
    build_engine: sleep_between_phases among them, which vLLM takes and the others ignore."""
    import inspect
    from dataclasses import fields

    from unified.schema import RolloutConfig
    from unified.trainer.engine import build_engine
    from unified.trainer.engine_vllm import VLLMEngine

    engine_keys = {f.name for f in fields(RolloutConfig)} - {f.name for f in fields(SamplingConfig)} - {"backend"}
    accepted = inspect.signature(build_engine).parameters
    assert engine_keys <= set(accepted), engine_keys - set(accepted)
    assert accepted["sleep_between_phases"].default is None
    assert "sleep_between_phases" in VLLMEngine.OPTIONS
    assert accepted["compile"].default is None and "compile" in VLLMEngine.OPTIONS
