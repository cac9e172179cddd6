"""A short, deterministic supervised warm-up for the embedded tiny model.

A random 1.3 M-parameter model writes noise: every answer earns the format penalty, every
GRPO group has zero advantage, and a test that trains would move no weight. So at build
time the tiny model is fine-tuned for a few hundred steps on gold answers of the tasks
each kind builds from one (input, output) pair, exactly as phase 3 builds them (the kinds'
own builders, chat template) from MBPP+'s canonical solutions and visible inputs, with the expected outputs
computed in the sandbox. Afterwards it writes `<answer>...</answer>` most of the time and
is right some of the time: within a rollout group rewards differ, so advantages, gradients
and weight updates are real. It is still a plumbing model, not a baseline: it memorises
answer shapes, it does not read code.

Deterministic: fixed seed, fixed corpus order, one thread, deterministic algorithms; the
same machine builds the same weights (tests/models/test_tiny_model.py checks it).
"""

from __future__ import annotations

import random
from pathlib import Path

STEPS = 120
BATCH = 8
LR = 3e-3
MAX_LEN = 256


def corpus(problem_limit: int | None = None) -> list[tuple[str, str]]:
    """(user prompt, gold answer) pairs: the tasks every kind builds from ONE (input,
    output) pair (a kind that needs several builds none), per visible case of
    every MBPP+ problem whose canonical solution runs."""
    from unified.kinds import KINDS, BuildOptions
    from unified.benchmarks.load import load_problems
    from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig
    from unified.pipeline.programs import canonical_programs
    from unified.values import to_literal
    from unified.types import IOTriple

    problems = load_problems("mbpp", None, problem_limit, [])
    programs = {p.problem_id: p for p in canonical_programs(problems)}
    cases = [(p, programs[p.problem_id], c.args) for p in problems if p.problem_id in programs for c in p.visible]
    with Executor(ExecutorConfig(workers=2)) as executor:
        results = executor.run_batch([ExecCall(prog.code, prog.entry_point, args) for _, prog, args in cases])
    pairs = []
    for (problem, program, args), result in zip(cases, results):
        try:
            output = to_literal(result.value) if result.ok else None
        except Exception:  # noqa: BLE001 - a value with no literal form makes no task
            continue
        if output is None or len(output) > 200:
            continue
        triple = IOTriple(problem.problem_id, program.program_id, args, result.value, "visible")
        for kind in KINDS.values():  # the kinds built per program (the solve kind has no pair of its own here)
            if not kind.PER_PROBLEM:
                pairs += [
                    (task.prompt, task.gold) for task in kind.build_problem(problem, [program], [triple], BuildOptions())[0]
                ]
    return pairs


def encode(tokenizer, prompt: str, answer: str) -> tuple[list[int], int]:
    """Token ids of the chat-formatted example and where the answer starts (loss from there)."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    head = tokenizer(text, add_special_tokens=False)["input_ids"]
    tail = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    ids = (head + tail)[-MAX_LEN:]
    return ids, max(0, len(ids) - len(tail))


def pretrain(path: Path, seed: int, steps: int = STEPS) -> None:
    """Fine-tune the model saved at `path` in place on `corpus()`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    examples = [encode(tokenizer, p, a) for p, a in corpus()]
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            _train(model, examples, tokenizer.pad_token_id, random.Random(seed), steps)
        model.save_pretrained(path, safe_serialization=True)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _train(model, examples, pad_id: int, rng: random.Random, steps: int) -> None:
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 20) * (1 - s / steps))
    model.train()
    order: list[int] = []
    for _ in range(steps):
        if len(order) < BATCH:
            order += rng.sample(range(len(examples)), len(examples))
        batch, order = [examples[i] for i in order[:BATCH]], order[BATCH:]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), pad_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, start) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, start : len(ids)] = torch.tensor(ids[start:])
            mask[row, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
    model.eval()
