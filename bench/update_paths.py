"""The two policy-update paths bench/train_throughput.py times against each other, and the
batches they train on.

`Ours`: the trainer's real update (build_policy under autocast in bf16 where chosen, float32
master weights, build_aggregator, train_on_samples: verl advantages and PPO loss, grad-norm
clip, AdamW, version bump). `Raw`: the same model loaded with `AutoModelForCausalLM`, the same
tuning, a plain importance-weighted policy-gradient loss, backward, AdamW, on the SAME
collated batches. `build_steps`: one optimizer step's samples (phase-1 prompts of MBPP+
through the chat template, random response tokens of 192, 168, 144, 120 in turn) and the
collated micro-batches both paths consume.
"""

from __future__ import annotations

import random


def model_path(name: str) -> str:
    from unified.models.resolve import resolve_model_path

    return str(resolve_model_path(name))


def phase1_prompt_ids(tok, count: int, length: int = 0) -> list[tuple[int, ...]]:
    """The token ids the engine feeds for the first `count` MBPP+ phase-1 prompts (chat
    template, as `Engine.encode`); `length` > 0 cuts or cycles each to that many tokens."""
    from engine_throughput import build_prompts

    out = []
    for messages in build_prompts(count):
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
        out.append(tuple((ids * (length // len(ids) + 1))[:length] if length else ids))
    return out


def make_samples(prompts, group: int, response_tokens: int, vocab: int, seed: int):
    """`group` samples per prompt, responses of response_tokens, 7/8, 6/8, 5/8 of it in turn;
    rewards that differ within every group (so none is dropped as zero-variance)."""
    from unified.types import Sample

    rng = random.Random(seed)
    samples = []
    for g, prompt in enumerate(prompts):
        for i in range(group):
            r = max(1, response_tokens - (i % 4) * max(1, response_tokens // 8))
            samples.append(
                Sample(
                    prompt_token_ids=prompt,
                    token_ids=tuple(rng.randrange(10, vocab - 10) for _ in range(r)),
                    logprobs=tuple(-rng.uniform(0.5, 4.0) for _ in range(r)),
                    reward=float(i % 3 == 0),
                    group=f"s{seed}g{g}",
                    version=0,
                )
            )
    return samples


class Ours:
    """The trainer's update: build_policy (autocast in bf16), build_aggregator, train_on_samples."""

    def __init__(self, path: str, tuning: str, args, pad_id: int):
        import torch

        from unified.schema import AlgorithmConfig
        from unified.trainer.aggregator import build_aggregator
        from unified.trainer.policy import build_policy
        from unified.trainer.tuning import TuningConfig

        self.policy = build_policy(
            path,
            device=torch.device("cpu"),
            dtype=args.dtype,
            tuning=TuningConfig(method=tuning, trainable_layers=args.top_layers),
        )
        self.cfg = AlgorithmConfig(
            lr=args.lr,
            micro_batch_size=args.micro_batch,
            accum_steps=args.accum,
            update_steps=args.update_steps,
            max_staleness=10**9,
        )
        self.agg = build_aggregator(self.cfg, self.policy)
        self.pad_id = pad_id
        expected = None if args.dtype == "float32" else getattr(torch, args.dtype)
        assert self.policy.autocast == expected, f"the policy computes in {self.policy.autocast}, not {args.dtype}"

    def step(self, samples) -> None:
        from unified.trainer.update import train_on_samples

        out = train_on_samples(samples, self.agg, self.cfg, engine=None, pad_token_id=self.pad_id)
        assert out.steps == 1, out


class Raw:
    """A plain HF model: forward (under autocast in `dtype`), loss, backward, AdamW. No
    FSDP, no verl, no aggregator."""

    def __init__(self, path: str, tuning: str, args, dtype: str, compile_: bool = False):
        import torch
        from transformers import AutoModelForCausalLM

        from unified.schema import AlgorithmConfig
        from unified.trainer.tuning import TuningConfig, apply_tuning

        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.config.use_cache = False
        if tuning != "full":
            model = apply_tuning(model, TuningConfig(method=tuning, trainable_layers=args.top_layers))
        model.train()
        self.model = model
        self.forward = torch.compile(model) if compile_ else model
        a = AlgorithmConfig(lr=args.lr)
        self.opt = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=a.lr, weight_decay=a.weight_decay, betas=a.betas
        )
        self.autocast = None if dtype == "float32" else getattr(torch, dtype)

    def step(self, batches) -> None:
        import torch

        for mb in batches:
            r = mb.response_mask.shape[1]
            position_ids = (mb.attention_mask.cumsum(-1) - 1).clamp(min=0)
            with torch.autocast("cpu", dtype=self.autocast or torch.bfloat16, enabled=self.autocast is not None):
                logits = self.forward(
                    input_ids=mb.input_ids,
                    attention_mask=mb.attention_mask,
                    position_ids=position_ids,
                    logits_to_keep=r + 1,
                    use_cache=False,
                ).logits
            logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, mb.input_ids[:, -r:, None]).squeeze(-1)
            ratio = torch.exp(logp - mb.old_log_probs)
            mask = mb.response_mask
            loss = -(ratio * mb.advantages * mask).sum() / (mask.sum() * len(batches))
            loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def build_steps(args, path: str, tok, vocab: int, pad_id: int) -> list[dict]:
    """One dict per distinct optimizer step: its samples (ours), collated batches (raw),
    real tokens and response tokens."""
    from unified.schema import AlgorithmConfig
    from unified.trainer.batching import collate, response_mask_of
    from unified.trainer.losses import compute_advantages

    per_step = args.micro_batch * args.accum * args.update_steps
    groups = max(1, per_step // args.group)
    prompts = phase1_prompt_ids(tok, groups * max(args.steps, args.warmup), args.prompt_tokens)
    steps = []
    for s in range(max(args.steps, args.warmup)):
        samples = make_samples(prompts[s * groups : (s + 1) * groups], args.group, args.response_tokens, vocab, seed=s)[:per_step]
        adv = list(
            compute_advantages(
                [x.reward for x in samples], response_mask_of(samples), [x.group for x in samples], AlgorithmConfig()
            )
        )
        batches = [
            collate(samples[j : j + args.micro_batch], adv[j : j + args.micro_batch], pad_id)
            for j in range(0, per_step, args.micro_batch)
        ]
        steps.append(
            {
                "samples": samples,
                "batches": batches,
                "tokens": sum(int(mb.attention_mask.sum()) for mb in batches),
                "response_tokens": sum(int(mb.response_mask.sum()) for mb in batches),
            }
        )
    return steps
