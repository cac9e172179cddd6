"""Phase 2: (input, program, output) triples.

Inputs per problem are its visible examples' arguments plus inputs the policy proposes
(one prompt per problem, not per program: every program of a problem runs on the same
inputs, which is what makes their behaviour comparable). Proposals are read as literals
(`values.from_literal`, an AST walk; never `eval`), and their containers are shaped like
the visible examples' (MBPP+ functions take tuples where a model writes lists).

Every program runs on every input in ONE `run_twice` batch for the whole round: the
second run is the determinism check, so phase 4 needs no executions of its own. A run
that fails, differs between the two runs, or returns an oversized or unserialisable
value gives a counted rejection instead of a triple.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from unified.kinds.shapes import input_lines
from unified.sandbox.executor import ExecCall
from unified.text.extract import declared_arity, proposed_inputs, shape_like
from unified.pipeline.generation import Generator, SamplingConfig, user_message
from unified.text.prompts import display, example_lines
from unified.values import from_literal, to_literal, values_equal
from unified.types import IOTriple, Problem, Program, Rejection

STATUS_REASON = {
    "error": "runtime_error",
    "timeout": "timeout",
    "memory": "memory",
    "banned": "banned",
    "crashed": "crashed",
    "bad_reply": "crashed",  # a reply the parent refused to read (sandbox.reply): no output either
}


@dataclass(frozen=True)
class Input:
    problem_id: str
    args: tuple
    source: str  # "visible" | "proposed"


def input_prompt(problem: Problem, count: int) -> str:
    examples = "\n".join(line for line in example_lines(problem) if line.startswith(">>>"))
    return (
        f"{problem.prompt.rstrip()}\n\n"
        f"The function is `{problem.entry_point}`."
        + (f" Example calls:\n{examples.replace('>>> ', '')}\n\n" if examples else "\n\n")
        + f"Write {count} new, varied test inputs for `{problem.entry_point}`: one call per line, "
        "with Python literals as arguments, all in one ```python code block."
    )


def round_trips(value) -> bool:
    """Whether the value survives literal text (prompts, answers and Parquet store it so)."""
    try:
        return values_equal(from_literal(to_literal(value)), value)
    except Exception:  # noqa: BLE001 - any failure to render or re-read means "no"
        return False


def _arity(problem: Problem) -> int | None:
    """The entry point's argument count: the visible examples', else the one its prompt's
    `def` declares (HumanEval prompts), else unknown."""
    if problem.visible:
        return len(problem.visible[0].args)
    return declared_arity(problem.prompt, problem.entry_point)


def collect_inputs(problem: Problem, proposal_text: str, limit: int) -> tuple[list[Input], list[Rejection]]:
    """Visible inputs, then up to `limit` proposed ones; dedup by literal text."""
    inputs, rejections, seen = [], [], set()
    examples = [c.args for c in problem.visible]

    def add(args: tuple, source: str, line: str) -> None:
        if not round_trips(args):
            rejections.append(Rejection("input", "unserialisable", problem.problem_id, line[:200]))
            return
        key = to_literal(args)
        if key in seen:
            rejections.append(Rejection("input", "duplicate", problem.problem_id, key[:200]))
            return
        seen.add(key)
        inputs.append(Input(problem.problem_id, args, source))

    for args in examples:
        add(tuple(args), "visible", display(tuple(args)))
    proposed = 0
    lines = proposed_inputs(proposal_text, problem.entry_point, _arity(problem))
    if limit > 0 and not lines:  # the model proposed nothing readable at all
        rejections.append(Rejection("input", "no_inputs", problem.problem_id, detail=proposal_text[:200]))
    for args, reason, line in lines:
        if proposed >= limit:
            break
        proposed += 1
        if args is None:
            rejections.append(Rejection("input", reason, problem.problem_id, line[:200]))
        else:
            add(shape_like(args, examples), "proposed", line)
    return inputs, rejections


def propose_inputs(
    problems: Sequence[Problem], generator: Generator, sampling: SamplingConfig, count: int, shaped: bool = False
) -> tuple[list[Input], list[Rejection]]:
    """`count` proposals per problem, read as calls; `shaped`: decoded as `count` calls of the
    entry point with its arity (kinds/shapes.py), where the arity is known."""
    texts = [""] * len(problems)
    if count > 0:
        shapes = [input_lines(p.entry_point, _arity(p), count) if shaped and _arity(p) is not None else None for p in problems]
        outputs = generator.generate([user_message(input_prompt(p, count)) for p in problems], sampling, shapes)
        texts = [completions[0].text if completions else "" for completions in outputs]
    inputs, rejections = [], []
    for problem, text in zip(problems, texts):
        got, rej = collect_inputs(problem, text, count)
        inputs += got
        rejections += rej
    return inputs, rejections


def _failure_reason(result) -> str:
    # The sandbox reports a return value with no literal form (or one over its size
    # limit) as an "error" whose message starts with this prefix.
    if result.status == "error" and result.error.startswith("unserialisable return value"):
        return "output_too_large" if "too large" in result.error else "unserialisable"
    return STATUS_REASON.get(result.status, result.status)


def classify_run(first, second, max_output_chars: int) -> str | None:
    """Why a pair of runs of the same call gives no triple, or None if it does."""
    for result in (first, second):
        if not result.ok:
            return _failure_reason(result)
    if not values_equal(first.value, second.value):
        return "nondeterministic"
    try:
        text = to_literal(first.value)
    except Exception:  # noqa: BLE001 - a value with no literal form
        return "unserialisable"
    if len(text) > max_output_chars:
        return "output_too_large"
    if not round_trips(first.value):
        return "unserialisable"
    return None


def execute(
    programs: Sequence[Program], inputs: Sequence[Input], run_twice, max_output_chars: int
) -> tuple[list[IOTriple], list[Rejection]]:
    """Every program on every input of its problem, in one sandbox batch (run twice)."""
    by_problem: dict[str, list[Input]] = {}
    for inp in inputs:
        by_problem.setdefault(inp.problem_id, []).append(inp)
    jobs = [(prog, inp) for prog in programs for inp in by_problem.get(prog.problem_id, [])]
    pairs = run_twice([ExecCall(prog.code, prog.entry_point, inp.args) for prog, inp in jobs]) if jobs else []
    triples, rejections = [], []
    for (prog, inp), (first, second) in zip(jobs, pairs):
        reason = classify_run(first, second, max_output_chars)
        if reason is None:
            triples.append(IOTriple(prog.problem_id, prog.program_id, inp.args, first.value, inp.source))
        else:
            error = first.error or second.error
            detail = f"input {display(inp.args)[:120]}" + (f": {error[:200]}" if error else "")
            rejections.append(Rejection("triple", reason, prog.problem_id, prog.program_id, detail=detail))
    return triples, rejections
