"""Phase 1: candidate programs for each problem.

The policy writes K programs per problem (one prompt, n samples). Each completion's code
is extracted (`extract.extract_program`), must parse and define the entry point, and is
deduplicated by its AST. Optionally a program must also pass the problem's VISIBLE
examples (`keep_passing_visible`); hidden tests are never looked at here.

`seed_programs: canonical` adds each problem's canonical solution as one more program:
the embedded tiny model writes noise, and a demo round needs some programs to build
tasks from. Such programs carry source="canonical".
"""

from __future__ import annotations

from typing import Callable, Sequence

from unified.kinds.shapes import code_answer
from unified.sandbox.executor import ExecCall
from unified.pipeline.generation import Generator, SamplingConfig, user_message
from unified.text.extract import code_key, extract_program
from unified.text.stops import AnswerEnd
from unified.text.prompts import display, program_prompt, with_prompt_imports
from unified.types import Problem, Program, Rejection
from unified.values import values_equal


def generate_programs(
    problems: Sequence[Problem],
    generator: Generator,
    sampling: SamplingConfig,
    shaped: bool = False,
    end: Callable[[str], AnswerEnd | None] = lambda entry_point: None,
) -> tuple[tuple[list[Program], dict], list[Rejection]]:
    """K completions per problem -> (programs that parse and define the entry point,
    problem id -> all K completions as sampled), rejections. `shaped`: decoded in the solve
    kind's shape (a ```python block that defines the entry point, kinds/shapes.py); `end`:
    entry point -> where a completion stops (`PipelineConfig.program_end`)."""
    shapes = [code_answer(p.entry_point, tagged=False) for p in problems] if shaped else None
    ends = [end(p.entry_point) for p in problems]
    outputs = generator.generate([user_message(program_prompt(p)) for p in problems], sampling, shapes, ends)
    programs, rejections = [], []
    by_problem = {problem.problem_id: tuple(group) for problem, group in zip(problems, outputs)}
    for problem, completions in zip(problems, outputs):
        for i, comp in enumerate(completions):
            pid = f"{problem.problem_id}#p{i}"
            code, reason = extract_program(comp.text, problem.entry_point)
            if code is None:
                rejections.append(Rejection("program", reason, problem.problem_id, pid, detail=comp.text[:200]))
                continue
            programs.append(Program(problem.problem_id, pid, with_prompt_imports(problem, code), problem.entry_point))
    return (programs, by_problem), rejections


def canonical_programs(problems: Sequence[Problem]) -> list[Program]:
    """Each problem's canonical solution as a program (seed_programs: canonical)."""
    out = []
    for p in problems:
        if not p.canonical_solution:
            continue
        code, _ = extract_program(p.canonical_solution, p.entry_point)
        pid = f"{p.problem_id}#canonical"
        out.append(Program(p.problem_id, pid, code or p.canonical_solution, p.entry_point, source="canonical"))
    return out


def deduplicate(programs: Sequence[Program]) -> tuple[list[Program], list[Rejection]]:
    """Keep the first of programs with the same AST within a problem."""
    seen, kept, rejections = set(), [], []
    for prog in programs:
        key = (prog.problem_id, code_key(prog.code))
        if key in seen:
            rejections.append(Rejection("program", "duplicate", prog.problem_id, prog.program_id))
            continue
        seen.add(key)
        kept.append(prog)
    return kept, rejections


def check_visible(programs: Sequence[Program], problems: Sequence[Problem], run_batch) -> tuple[set[str], list[Rejection]]:
    """Ids of the programs that return every visible example's expected value (examples
    without an expected value are not checked), and a `fails_visible` rejection for each
    of the others."""
    by_id = {p.problem_id: p for p in problems}
    calls, owner = [], []
    for i, prog in enumerate(programs):
        for case in by_id[prog.problem_id].visible:
            if case.expected is not None:
                calls.append(ExecCall(prog.code, prog.entry_point, case.args))
                owner.append((i, case))
    results = run_batch(calls) if calls else []
    failed: dict[int, str] = {}
    for (i, case), result in zip(owner, results):
        atol = by_id[programs[i].problem_id].atol
        if i not in failed and not (result.ok and values_equal(result.value, case.expected, atol=atol)):
            got = result.error if not result.ok else f"{display(case.args)} -> {display(result.value)}"
            failed[i] = got[:200]
    passing = {p.program_id for i, p in enumerate(programs) if i not in failed}
    rejections = [
        Rejection("program", "fails_visible", programs[i].problem_id, programs[i].program_id, detail=detail)
        for i, detail in failed.items()
    ]
    return passing, rejections


def keep_passing_visible(
    programs: Sequence[Program], problems: Sequence[Problem], run_batch
) -> tuple[list[Program], list[Rejection]]:
    """Programs that return every visible example's expected value."""
    passing, rejections = check_visible(programs, problems, run_batch)
    return [p for p in programs if p.program_id in passing], rejections
