"""Answer shapes under xgrammar on any device: each kind's grammar (unified/kinds/shapes.py)
compiled for a model's tokenizer, sampled token by token with xgrammar's bitmask applied
to the logits ON the device (`xgr.apply_token_bitmask_inplace`, the call vLLM makes on
CUDA and, in float32, on CPU), and every finished answer read by its kind's parser.

    python -m bench.shapes_check [--device cuda|cpu] [--model tiny|PATH] [--n 8] [--max-tokens 96]

It checks what vLLM's structured outputs rest on where vLLM itself is not installed (the
lent GPU machine has no vLLM): the grammars compile, the mask runs on the device, and the
answers parse. Writes logs/bench/shapes_check.json: per shape, samples, finished, parse
failures among the finished, tokens and seconds. Exit 1 when a finished answer fails to
parse, or no answer of any shape finished (the embedded tiny model rarely closes a code
block within the budget: its code shapes are checked by their forced prefix in the tests).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.common import REPO, write_json

PROBLEM_ARGS = (((3, 4, 5, 6), (5, 7, 4, 10)), (4, 5))  # similar_elements(a, b) -> shared items


def cases():
    """(name, prompt, grammar, reader) per shape: a reader returns a parse failure or None."""
    from unified.kinds import KINDS, BuildOptions, shapes
    from unified.pipeline.ipo import input_prompt
    from unified.pipeline.rewards import parse_answer
    from unified.text.extract import proposed_inputs
    from unified.types import IOTriple, Problem, Program, TestCase

    problem = Problem(
        "P/1",
        "mbpp",
        "Write a function to find the shared elements of two lists.",
        "similar_elements",
        (TestCase(*PROBLEM_ARGS),),
    )
    program = Program(
        "P/1", "P/1#p0", "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n", "similar_elements"
    )
    triples = [
        IOTriple("P/1", "P/1#p0", PROBLEM_ARGS[0], PROBLEM_ARGS[1], "visible"),
        IOTriple("P/1", "P/1#p0", ((1, 2), (2,)), (2,), "proposed"),
    ]
    out = []
    for kind in ("deduction", "abduction", "induction"):
        task = KINDS[kind].build(problem, program, triples, BuildOptions())[0][0]
        out.append((kind, task.prompt, KINDS[kind].answer_shape(task), lambda text, t=task: parse_answer(t, text)[1]))
    solve = shapes.code_answer(problem.entry_point, tagged=False)
    out.append(("solve", problem.prompt, solve, lambda text: None if "def similar_elements(" in text else "no_entry_point"))
    read = lambda text: (  # noqa: E731
        None if len([a for a, _, _ in proposed_inputs(text, "similar_elements", 2) if a is not None]) == 2 else "inputs"
    )
    out.append(("inputs", input_prompt(problem, 2), shapes.input_lines("similar_elements", 2, 2), read))
    return out


def sample(model, tokenizer, compiled, prompt: str, n: int, max_tokens: int, device, seed: int):
    """n completions of `prompt` decoded in `compiled` (no KV cache tricks: the check is the mask)."""
    import torch
    import xgrammar as xgr

    torch.manual_seed(seed)
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"].to(device)
    matchers = [xgr.GrammarMatcher(compiled) for _ in range(n)]
    bitmask = xgr.allocate_token_bitmask(n, compiled.tokenizer_info.vocab_size)
    ids, done, cache = prompt_ids.repeat(n, 1), [False] * n, None
    generated = [[] for _ in range(n)]
    for _ in range(max_tokens):
        with torch.no_grad():
            out = model(input_ids=ids if cache is None else ids[:, -1:], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[:, -1, :].float()
        for i, m in enumerate(matchers):
            if not done[i]:
                m.fill_next_token_bitmask(bitmask, i)
        xgr.apply_token_bitmask_inplace(logits, bitmask.to(device))
        nxt = torch.multinomial(torch.softmax(logits, -1), 1)
        for i, m in enumerate(matchers):
            if done[i]:
                continue
            tok = int(nxt[i])
            if m.is_terminated() or tok == tokenizer.eos_token_id:
                done[i] = True
                continue
            assert m.accept_token(tok), "the mask let through a token the grammar refuses"
            generated[i].append(tok)
            done[i] = m.is_terminated()
        ids = torch.cat([ids, nxt], dim=1)
        if all(done):
            break
    return [(tokenizer.decode(g, skip_special_tokens=True), d) for g, d in zip(generated, done)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default=None, help="cuda when available, else cpu")
    p.add_argument("--model", default="tiny")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--output", default=str(REPO / "logs" / "bench" / "shapes_check.json"))
    args = p.parse_args()
    import torch
    import xgrammar as xgr
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unified.models.resolve import resolve_model_path

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    path = resolve_model_path(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    compiler = xgr.GrammarCompiler(info)
    rows, failed, finished_any = [], 0, 0
    for name, prompt, grammar, read in cases():
        t0 = time.perf_counter()
        compiled = compiler.compile_grammar(grammar)
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = sample(model, tokenizer, compiled, prompt, args.n, args.max_tokens, device, seed=0)
        finished = [text for text, done in got if done]
        failures = [text for text in finished if read(text) is not None]
        failed, finished_any = failed + len(failures), finished_any + len(finished)
        rows.append(
            dict(
                shape=name,
                samples=len(got),
                finished=len(finished),
                parse_failures=len(failures),
                compile_s=round(compile_s, 3),
                sample_s=round(time.perf_counter() - t0, 2),
                example=finished[0][:160] if finished else got[0][0][:160],
                failed=failures[:2],
            )
        )
        print(
            f"{name:10s} finished {len(finished)}/{len(got)}  parse failures {len(failures)}  "
            f"compile {compile_s:.2f}s  e.g. {rows[-1]['example'][:70]!r}"
        )
    ok = failed == 0 and finished_any > 0
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(args.output), {"device": device_name, "model": args.model, "ok": ok, "shapes": rows}, indent=1)
    print(f"shapes under xgrammar on {device_name}: {'ok' if ok else 'FAILED'} -> {args.output}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
