"""What compiling grammars in line costs a round: every distinct answer shape of one round of
the default recipe, compiled by xgrammar as vLLM's engine compiles it (`GrammarCompiler` over
the model's tokenizer, 8 threads, its cache on), once cold and once again from the cache.

The engine compiles each request's grammar when the request is added (`engine_vllm.
compile_grammars_in_line`, issue 61: on vLLM's thread pool a late compile moved a request
into another prefill batch and changed its log-probs). In line, the compile is on the engine's
path instead of beside it: at most `cold_s` a round (every shape is new once; the n samples of a
prompt and later rounds hit the cache, `warm_ms_median` each), against a default round of
~1,100-2,400 s on 2 cores. The shapes: per problem `solve`'s code, induction's tagged code,
abduction's call and phase 2's input lines (the entry point's arity from its visible example),
and the one literal shape of deduction.

    python -m bench.grammar_compile [--model smollm2] [--problems 94] [--inputs 2]

Writes logs/bench/grammar_compile.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import OUT, write_json
from unified.benchmarks.load import load_problems
from unified.kinds import shapes
from unified.models.resolve import resolve_model_path


def round_shapes(problems, inputs: int) -> list[str]:
    """The distinct grammars one round asks the engine for."""
    out = {shapes.literal_answer()}
    for p in problems:
        arity = len(p.visible[0].args) if p.visible and p.visible[0].args is not None else None
        out |= {shapes.code_answer(p.entry_point, tagged=False), shapes.code_answer(p.entry_point, tagged=True)}
        if arity is not None:
            out |= {shapes.call_answer(p.entry_point, arity), shapes.input_lines(p.entry_point, arity, inputs)}
    return sorted(out)


def _timed(compile_grammar, grammars: list[str]) -> tuple[list[float], float, float]:
    """Per grammar wall milliseconds; total wall and process CPU seconds."""
    each, wall0, cpu0 = [], time.perf_counter(), time.process_time()
    for g in grammars:
        t = time.perf_counter()
        compile_grammar(g)
        each.append(1000 * (time.perf_counter() - t))
    return each, time.perf_counter() - wall0, time.process_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="whose tokenizer (a built-in name or a folder)")
    parser.add_argument("--problems", type=int, default=94, help="MBPP+ problems (bundled order)")
    parser.add_argument("--inputs", type=int, default=2, help="calls per phase-2 proposal (pipeline.num_proposed_inputs)")
    args = parser.parse_args()

    import xgrammar as xgr
    from transformers import AutoConfig, AutoTokenizer

    path = str(resolve_model_path(args.model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=AutoConfig.from_pretrained(path).vocab_size)
    compiler = xgr.GrammarCompiler(info, max_threads=8, cache_enabled=True)  # as vLLM's xgrammar backend
    grammars = round_shapes(load_problems("mbpp")[: args.problems], args.inputs)
    cold, cold_s, cold_cpu = _timed(compiler.compile_grammar, grammars)
    warm, warm_s, _ = _timed(compiler.compile_grammar, grammars)
    result = {
        "model": args.model,
        "vocab_size": info.vocab_size,
        "problems": args.problems,
        "grammars": len(grammars),
        "cold_s": round(cold_s, 3),
        "cold_cpu_s": round(cold_cpu, 3),
        "cold_ms_median": round(statistics.median(cold), 2),
        "cold_ms_max": round(max(cold), 2),
        "warm_s": round(warm_s, 4),
        "warm_ms_median": round(statistics.median(warm), 3),
    }
    out = OUT / "grammar_compile.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, result, indent=2)
    print(
        f"{len(grammars)} grammars ({args.problems} problems): cold {cold_s:.2f} s "
        f"(median {result['cold_ms_median']} ms, CPU {cold_cpu:.2f} s), cached {warm_s * 1000:.1f} ms in all"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
