"""One micro-batch of a group's samples, forward and backward, with and without
`algorithm.share_prompts` (each distinct prompt run once, the answers on its KV cache), and
with and without frozen weights held in bf16 (`unified/trainer/frozen_cast.py`; the other
arm casts them in every forward, as autocast does by itself), and with and without the
log-probs taken from the hidden states (`unified/trainer/vocab.py`: real answer positions
only, in chunks) instead of the full (B, R, vocab) logits.

    python -m bench.shared_prompts [--prompt 190] [--responses 60,70,80,90,100,110,130,160] [--repeats 5]

SmolLM2-135M-Instruct, the default tuning (top 4 layers), `model.dtype=auto`, 2 threads:
the learner's micro-batch (8 samples of one prompt, as a group of 16 splits in two). The two
arms alternate; figures are medians of this process's CPU seconds after the first round (read
it on an idle machine). Writes logs/bench/shared_prompts.json with `ratio` = shared / plain
(both casting per forward, full logits), `ratio_held` = held / cast (both shared, full
logits), `ratio_hidden` = from the hidden states / full logits (both shared and held) and
`ratio_all` = all three / none.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.common import REPO, write_json
from unified.models import smollm2  # noqa: E402
from unified.trainer.batching import collate  # noqa: E402
from unified.trainer.distributed import init_distributed, resolve_dtype  # noqa: E402
from unified.trainer.frozen_cast import release_frozen_weights  # noqa: E402
from unified.trainer.policy import build_policy  # noqa: E402
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.tuning import TuningConfig  # noqa: E402
from unified.types import Sample  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prompt", type=int, default=190, help="prompt tokens (a chat-templated phase-1 prompt: ~190)")
    p.add_argument("--responses", default="60,70,80,90,100,110,130,160", help="each sample's answer tokens")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--output", type=Path, default=REPO / "logs" / "bench" / "shared_prompts.json")
    args = p.parse_args()
    torch.set_num_threads(2)
    build = lambda: build_policy(  # noqa: E731
        str(smollm2.model_dir()),
        device=init_distributed("cpu").device,
        dtype="auto",
        tuning=TuningConfig(method="top_layers", trainable_layers=4),
    )
    policies = {"held": build(), "cast": build()}
    release_frozen_weights(policies["cast"].module)
    gen = torch.Generator().manual_seed(0)
    tokens = lambda n: tuple(torch.randint(10, 4000, (n,), generator=gen).tolist())  # noqa: E731
    prompt = tokens(args.prompt)
    lengths = [int(r) for r in args.responses.split(",")]
    samples = [Sample(prompt, tokens(r), (-1.0,) * r, 0.0, 0, 0) for r in lengths]
    batch = collate(samples, [torch.ones(r) for r in lengths], 0)

    def step(share: bool, frozen: str, hidden: bool) -> float:
        policy = policies[frozen]
        start = time.process_time()
        policy.module.zero_grad()
        with policy.compute():
            logp, _ = token_logprobs_and_entropy(
                policy.module,
                batch.input_ids,
                batch.attention_mask,
                batch.response_mask,
                share_prompts=share,
                entropy_grad=False,
                from_hidden=hidden,
            )
        (logp * batch.response_mask).sum().backward()
        return time.process_time() - start

    arms = {
        "plain": (False, "cast", False),
        "shared": (True, "cast", False),
        "shared+held": (True, "held", False),
        "shared+held+hidden": (True, "held", True),
    }
    runs: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.repeats):
        for name, arm in arms.items():
            runs[name].append(step(*arm))
    med = {name: statistics.median(v[1:] or v) for name, v in runs.items()}
    through = {"plain": len(lengths) * args.prompt + sum(lengths), "shared": args.prompt + sum(lengths)}
    result = {
        "cpu_s": med,
        "ratio": med["shared"] / med["plain"],
        "ratio_held": med["shared+held"] / med["shared"],
        "ratio_hidden": med["shared+held+hidden"] / med["shared+held"],
        "ratio_all": med["shared+held+hidden"] / med["plain"],
        "tokens_through_model": through,
        "runs": runs,
        "settings": {
            "prompt": args.prompt,
            "responses": lengths,
            "dtype": resolve_dtype("auto", "cpu"),
            "threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, result, indent=1)
    print(
        " | ".join(f"{k} {v:.2f} CPU s" for k, v in med.items()) + f" | shared/plain {result['ratio']:.3f} | "
        f"held/cast {result['ratio_held']:.3f} | hidden/logits {result['ratio_hidden']:.3f} | all {result['ratio_all']:.3f} | "
        f"tokens through the model {through['plain']} -> {through['shared']} -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
