"""Policy-update throughput: our update path against a plain Hugging Face training step.

Ours: `train_on_samples` -> verl advantages (GRPO) -> collate -> FSDP2 policy forward
(`token_logprobs_and_entropy`) -> verl PPO loss -> `Aggregator.backward` -> grad-norm clip,
AdamW step, version bump (no engine: the push is bench/push_time.py's subject).
Raw: the same model loaded with `AutoModelForCausalLM`, no FSDP, the same tuning applied
(`apply_tuning`: peft LoRA, or only the top blocks trainable), on the SAME collated
batches: forward with the same `logits_to_keep`, log-softmax of the response tokens, a
plain importance-weighted policy-gradient loss, backward, AdamW step. Both update after
`--accum` micro-batches of `--micro-batch` samples (`--prompt-tokens` + `--response-tokens`
each; random token ids, every response a little shorter than the last, so padding and
masks are exercised while shapes stay fixed).

Runs are interleaved (ours, raw, raw, ours, ...) after `--warmup` untimed steps per path;
figures are medians. tokens/s counts real (non-padding) tokens of the forward (prompt +
response). `ratio` = ours / raw for the default tuning (configs/train.yaml's, top_layers);
each tuning has its own ratio. Every step is timed twice: wall clock (`*_tok_s`, `ratio`)
and this process's CPU time (`*_cpu_tok_s`, `ratio_cpu`). On the shared 2-core machine the
wall clock measures mostly who else runs (load 5-12: the same step took 7 to 21 s), while
CPU time counts only the work done, so `ratio_cpu` is the comparison to read under load.
Also, for the default tuning: the raw step under `torch.compile` (compile time reported
apart) and with bf16 autocast when the CPU has bf16 units (`--bf16 force` measures it
anyway: without them bf16 is emulated and slow).

    python bench/train_throughput.py [--model smollm2] [--tunings full,lora,top_layers] [--threads 1]
                                     [--steps 3] [--no-compile] [--bf16 auto|force|off] [--quick]

Writes logs/bench/train_throughput.json: ratio, ratio_cpu, ratio_tuning, ours_tok_s,
raw_tok_s, tunings.<method> {ours_tok_s, raw_tok_s, ratio, ours_cpu_tok_s, raw_cpu_tok_s,
ratio_cpu, runs}, raw_compile_tok_s, raw_bf16_tok_s, threads, machine.load_avg_1m. Target:
ratio >= 0.9. On a loaded machine record the load and compare only figures from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "logs" / "bench" / "train_throughput.json"
TARGET_RATIO = 0.9
DEFAULT_TUNING = "top_layers"  # configs/train.yaml's default tuning: the headline ratio


def model_path(name: str) -> str:
    if name == "smollm2":
        from unified.models.smollm2 import model_dir

        return str(model_dir())
    if name == "tiny":
        from unified.models.tiny_model import default_model_dir

        return str(default_model_dir())
    return name


def make_samples(n: int, prompt_tokens: int, response_tokens: int, vocab: int, seed: int):
    from unified.types import Sample

    rng = random.Random(seed)
    samples = []
    for i in range(n):
        r = max(1, response_tokens - (i % 4) * max(1, response_tokens // 8))  # the first of every 4 is full length
        p = max(1, prompt_tokens - (i % 3) * max(1, prompt_tokens // 10))
        samples.append(Sample(
            prompt_token_ids=tuple(rng.randrange(10, vocab - 10) for _ in range(p)),
            token_ids=tuple(rng.randrange(10, vocab - 10) for _ in range(r)),
            logprobs=tuple(-rng.uniform(0.5, 4.0) for _ in range(r)),
            reward=float(rng.random() < 0.5),
            group=f"g{i // 4}",
            version=0,
        ))  # fmt: skip
    return samples


def bf16_supported() -> bool:
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001
        return False


class Ours:
    def __init__(self, path: str, tuning: str, layers: int, lr: float, micro: int, accum: int, pad_id: int):
        import torch

        from unified.trainer.aggregator import Aggregator
        from unified.trainer.policy import build_policy
        from unified.trainer.tuning import TuningConfig
        from unified.schema import AlgorithmConfig

        self.policy = build_policy(path, device=torch.device("cpu"), dtype="float32",
                                   tuning=TuningConfig(method=tuning, trainable_layers=layers))  # fmt: skip
        opt = torch.optim.AdamW(self.policy.trainable_parameters(), lr=lr)
        self.agg = Aggregator(self.policy, opt, accum_steps=accum, update_steps=1, grad_clip=1.0,
                              max_staleness=10**9, micro_batch_size=micro)  # fmt: skip
        self.cfg = AlgorithmConfig(micro_batch_size=micro, accum_steps=accum, update_steps=1)
        self.pad_id = pad_id

    def step(self, samples) -> None:
        from unified.trainer.update import train_on_samples

        out = train_on_samples(samples, self.agg, self.cfg, engine=None, pad_token_id=self.pad_id)
        assert out.steps == 1, out


class Raw:
    """A plain HF model: forward, loss, backward, AdamW. No FSDP, no verl, no aggregator."""

    def __init__(self, path: str, tuning: str, layers: int, lr: float, compile_: bool = False, bf16: bool = False):
        import torch
        from transformers import AutoModelForCausalLM

        from unified.trainer.tuning import TuningConfig, apply_tuning

        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.config.use_cache = False
        if tuning != "full":
            model = apply_tuning(model, TuningConfig(method=tuning, trainable_layers=layers))
        model.train()
        self.model = model
        self.forward = torch.compile(model) if compile_ else model
        self.opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        self.bf16 = bf16

    def step(self, batches) -> None:
        import torch

        for mb in batches:
            r = mb.response_mask.shape[1]
            position_ids = (mb.attention_mask.cumsum(-1) - 1).clamp(min=0)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                logits = self.forward(input_ids=mb.input_ids, attention_mask=mb.attention_mask,
                                      position_ids=position_ids, logits_to_keep=r + 1, use_cache=False).logits  # fmt: skip
            logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, mb.input_ids[:, -r:, None]).squeeze(-1)
            ratio = torch.exp(logp - mb.old_log_probs)
            mask = mb.response_mask
            loss = -(ratio * mb.advantages * mask).sum() / (mask.sum() * len(batches))
            loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def measure_tuning(path, tuning, args, steps_samples, steps_batches, pad_id, tokens_per_step, extra_raw=()) -> dict:
    import gc

    ours = Ours(path, tuning, args.top_layers, args.lr, args.micro_batch, args.accum, pad_id)
    raw = Raw(path, tuning, args.top_layers, args.lr)
    trainable = sum(p.numel() for p in raw.model.parameters() if p.requires_grad)
    for w in range(args.warmup):
        ours.step(steps_samples[w % len(steps_samples)])
        raw.step(steps_batches[w % len(steps_batches)])
    runs = {"ours": [], "raw": [], "ours_cpu": [], "raw_cpu": []}
    for rep in range(args.steps):
        order = ("ours", "raw") if rep % 2 == 0 else ("raw", "ours")
        for which in order:
            start, cpu = time.perf_counter(), time.process_time()
            if which == "ours":
                ours.step(steps_samples[rep % len(steps_samples)])
            else:
                raw.step(steps_batches[rep % len(steps_batches)])
            runs[which].append(tokens_per_step / (time.perf_counter() - start))
            runs[f"{which}_cpu"].append(tokens_per_step / (time.process_time() - cpu))
        print(f"  {tuning} step {rep + 1}/{args.steps}: ours {runs['ours'][-1]:7.1f} tok/s ({runs['ours_cpu'][-1]:.1f} per CPU s)  "
              f"raw {runs['raw'][-1]:7.1f} tok/s ({runs['raw_cpu'][-1]:.1f} per CPU s)", flush=True)  # fmt: skip
    o, r = statistics.median(runs["ours"]), statistics.median(runs["raw"])
    oc, rc = statistics.median(runs["ours_cpu"]), statistics.median(runs["raw_cpu"])
    result = {
        "ours_tok_s": round(o, 2),
        "raw_tok_s": round(r, 2),
        "ratio": round(o / r, 3),
        "pair_ratio_median": round(statistics.median(a / b for a, b in zip(runs["ours"], runs["raw"])), 3),
        "ours_cpu_tok_s": round(oc, 2),
        "raw_cpu_tok_s": round(rc, 2),
        "ratio_cpu": round(oc / rc, 3),
        "trainable_params": trainable,
        **{f"{k}_runs": [round(x, 2) for x in v] for k, v in runs.items()},
    }
    del ours, raw
    gc.collect()
    for name, kwargs in extra_raw:  # raw variants (compile, bf16): their own warm-up, then timed alone
        print(f"  {tuning} raw {name} ...", flush=True)
        variant = Raw(path, tuning, args.top_layers, args.lr, **kwargs)
        start = time.perf_counter()
        variant.step(steps_batches[0])  # compiles here
        first = time.perf_counter() - start
        for w in range(1, args.warmup):
            variant.step(steps_batches[w % len(steps_batches)])
        xs = []
        for rep in range(args.steps):
            start = time.perf_counter()
            variant.step(steps_batches[rep % len(steps_batches)])
            xs.append(tokens_per_step / (time.perf_counter() - start))
        result[f"raw_{name}_tok_s"] = round(statistics.median(xs), 2)
        result[f"raw_{name}_runs"] = [round(x, 2) for x in xs]
        result[f"raw_{name}_first_step_s"] = round(first, 1)
        print(f"  {tuning} raw {name}: {result[f'raw_{name}_tok_s']} tok/s (first step {first:.1f} s)", flush=True)
        del variant
        gc.collect()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny or an HF folder")
    parser.add_argument("--tunings", default=f"{DEFAULT_TUNING},full,lora", help="the first gives `ratio`")
    parser.add_argument("--top-layers", type=int, default=4, help="trainable blocks for top_layers")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 is faster on a loaded 2-core machine)")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--prompt-tokens", type=int, default=160)
    parser.add_argument("--response-tokens", type=int, default=96)
    parser.add_argument("--steps", type=int, default=3, help="timed optimizer steps per path (median)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile raw variant")
    parser.add_argument("--bf16", choices=("auto", "force", "off"), default="auto", help="bf16 autocast raw variant: auto = only with bf16 units")
    parser.add_argument("--quick", action="store_true", help="smoke run: B=2, 48+32 tokens, 2 steps, no compile")
    args = parser.parse_args()
    if args.quick:
        args.micro_batch, args.prompt_tokens, args.response_tokens, args.steps, args.no_compile = 2, 48, 32, 2, True
    args.warmup = max(1, args.warmup)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    import torch

    torch.set_num_threads(args.threads)
    from unified.models.resolve import load_tokenizer
    from unified.trainer.batching import collate
    from unified.trainer.distributed import init_distributed
    from unified.schema import AlgorithmConfig
    from unified.trainer.losses import compute_advantages
    from unified.trainer.batching import response_mask_of

    init_distributed("cpu")
    path = model_path(args.model)
    tok = load_tokenizer(path)
    cfg = json.loads((Path(path) / "config.json").read_text())
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    per_step = args.micro_batch * args.accum
    n_sets = max(args.steps, args.warmup)
    steps_samples, steps_batches = [], []
    for s in range(n_sets):
        samples = make_samples(per_step, args.prompt_tokens, args.response_tokens, cfg["vocab_size"], seed=s)
        adv = list(compute_advantages([x.reward for x in samples], response_mask_of(samples), [x.group for x in samples], AlgorithmConfig()))
        steps_samples.append(samples)
        steps_batches.append([collate(samples[j : j + args.micro_batch], adv[j : j + args.micro_batch], pad_id)
                              for j in range(0, per_step, args.micro_batch)])  # fmt: skip
    tokens_per_step = sum(int(mb.attention_mask.sum()) for mb in steps_batches[0])
    assert all(sum(int(mb.attention_mask.sum()) for mb in b) == tokens_per_step for b in steps_batches)
    response_per_step = sum(int(mb.response_mask.sum()) for mb in steps_batches[0])

    can_bf16 = bf16_supported()
    tunings = [t.strip() for t in args.tunings.split(",") if t.strip()]
    results = {}
    load_start = os.getloadavg()[0]
    for tuning in tunings:
        extra = []
        if tuning == tunings[0]:
            if not args.no_compile:
                extra.append(("compile", {"compile_": True}))
            if args.bf16 == "force" or (args.bf16 == "auto" and can_bf16):
                extra.append(("bf16", {"bf16": True}))
        print(f"{tuning}: measuring ({tokens_per_step} tokens per step, {args.threads} thread(s)) ...", flush=True)
        results[tuning] = measure_tuning(path, tuning, args, steps_samples, steps_batches, pad_id, tokens_per_step, extra)

    main_key = tunings[0]
    body = {
        "ratio": results[main_key]["ratio"],
        "ratio_cpu": results[main_key]["ratio_cpu"],
        "ratio_tuning": main_key,
        "ours_tok_s": results[main_key]["ours_tok_s"],
        "raw_tok_s": results[main_key]["raw_tok_s"],
        "ours_cpu_tok_s": results[main_key]["ours_cpu_tok_s"],
        "raw_cpu_tok_s": results[main_key]["raw_cpu_tok_s"],
        "raw_compile_tok_s": results[main_key].get("raw_compile_tok_s"),
        "raw_bf16_tok_s": results[main_key].get("raw_bf16_tok_s"),
        "bf16_supported": can_bf16,
        "target_ratio": TARGET_RATIO,
        "threads": args.threads,
        "tunings": results,
        "settings": {
            "model": args.model, "model_dir": path, "micro_batch": args.micro_batch, "accum": args.accum,
            "prompt_tokens": args.prompt_tokens, "response_tokens": args.response_tokens,
            "tokens_per_step": tokens_per_step, "response_tokens_per_step": response_per_step,
            "steps": args.steps, "warmup": args.warmup, "top_layers": args.top_layers, "dtype": "float32",
            "tok_s": "real (non-padding) prompt + response tokens per second of optimizer steps",
        },  # fmt: skip
        "machine": {
            "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "load_avg_1m_start": round(load_start, 2),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }
    if body["raw_compile_tok_s"] is None:
        body["raw_compile_note"] = "skipped (--no-compile or --quick)"
    if body["raw_bf16_tok_s"] is None:
        body["raw_bf16_note"] = "skipped: this CPU has no bf16 units (--bf16 force measures the emulated path)" if not can_bf16 else "skipped (--bf16 off)"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(body, indent=2) + "\n")
    print()
    print(f"{'tuning':<11} {'trainable':>11} {'ours tok/s':>11} {'raw tok/s':>10} {'ratio':>6} {'per CPU s: ours':>16} {'raw':>6} {'ratio':>6}")
    for t, r in results.items():
        print(f"{t:<11} {r['trainable_params']:>11,} {r['ours_tok_s']:>11.1f} {r['raw_tok_s']:>10.1f} {r['ratio']:>6.3f} "
              f"{r['ours_cpu_tok_s']:>16.1f} {r['raw_cpu_tok_s']:>6.1f} {r['ratio_cpu']:>6.3f}")  # fmt: skip
    if body["raw_compile_tok_s"]:
        print(f"raw {main_key} + torch.compile: {body['raw_compile_tok_s']} tok/s")
    print(f"raw {main_key} + bf16 autocast: {body['raw_bf16_tok_s'] or body.get('raw_bf16_note')}")
    verdict = "ok" if body["ratio"] >= TARGET_RATIO else f"BELOW TARGET {TARGET_RATIO}"
    print(f"ratio ({main_key}) {body['ratio']} ({verdict}), per CPU second {body['ratio_cpu']}; {args.threads} thread(s), "
          f"load {body['machine']['load_avg_1m_start']} -> {body['machine']['load_avg_1m']}")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
