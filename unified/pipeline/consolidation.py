"""Consolidation's targets: one fixed answer per problem that greedy decoding should give.

Each round, after the update (`trainer/consolidate.py` trains them):
- a problem whose greedy answer passes its visible example goes in with that answer, so
  consolidation never unlearns it;
- otherwise its target is chosen among its passing samples (this round's phase 1) and its
  previous target by **agreement**: the answer whose outputs on the round's proposed inputs
  (phase 2's triples) agree with the most other passing answers, ties by the mean log-prob
  it was sampled with. The previous target stays unless another agrees strictly more, so a
  target changes only when a better-agreeing one appears (not with every new pass).

Everything here reads visible examples and the model's own inputs, never a hidden test; the
choice is a pure function of its inputs (the sandbox calls are deterministic runs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Mapping, Sequence

from unified.pipeline.generation import Generator, SamplingConfig
from unified.pipeline.programs import check_visible, generate_programs
from unified.sandbox.executor import ExecCall
from unified.text.extract import code_key
from unified.text.stops import AnswerEnd
from unified.types import Completion, IOTriple, Problem, Program
from unified.values import to_literal

GREEDY, FOUND = "greedy", "found"


@dataclass(frozen=True)
class Target:
    """A problem's answer for consolidation: the completion whose tokens train, its program,
    how many other passing answers agreed with it when chosen, and where it came from."""

    problem_id: str
    completion: Completion
    code: str
    agreement: int
    source: str  # GREEDY | FOUND


@dataclass(frozen=True)
class Greedy:
    """A problem's greedy answer: the completion, its program (None: no code extracted) and
    whether it returns every visible example's expected value."""

    completion: Completion
    program: Program | None
    passes: bool


def greedy_answers(
    problems: Sequence[Problem],
    generator: Generator,
    run_batch,
    max_tokens: int,
    end: Callable[[str], AnswerEnd | None] = lambda entry_point: None,
) -> dict[str, Greedy]:
    """Each problem's greedy answer (the evaluation's decoding: phase 1's prompt, temperature 0;
    `end`: where it may stop, `PipelineConfig.program_end`: at the block that answers, which
    changes no extracted program, text/stops.py) and whether it passes its visible examples
    (only problems that have one with a value can pass)."""
    sampling = SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_tokens=max_tokens, seed=0)
    (programs, completions), _ = generate_programs(problems, generator, sampling, end=end)
    passing, _ = check_visible(programs, problems, run_batch)
    checked = {p.problem_id for p in problems if any(c.expected is not None for c in p.visible)}
    by_problem = {prog.problem_id: prog for prog in programs}
    return {
        p.problem_id: Greedy(
            completions[p.problem_id][0],
            by_problem.get(p.problem_id),
            p.problem_id in checked and f"{p.problem_id}#p0" in passing,
        )
        for p in problems
        if completions.get(p.problem_id)
    }


def signatures(triples: Sequence[IOTriple]) -> dict[str, dict[str, str]]:
    """program id -> {proposed input: output}, as literal text (phase 2's runs)."""
    out: dict[str, dict[str, str]] = {}
    for t in triples:
        if t.input_source == "proposed":
            out.setdefault(t.program_id, {})[to_literal(t.args)] = to_literal(t.output)
    return out


def run_signature(program: Program, inputs: Sequence[tuple], run_batch) -> dict[str, str]:
    """{input: output} of `program` on `inputs` (a run that fails has no output there)."""
    results = run_batch([ExecCall(program.code, program.entry_point, args) for args in inputs]) if inputs else []
    return {to_literal(args): to_literal(r.value) for args, r in zip(inputs, results) if r.ok}


def agreement(signature: dict[str, str], others: Sequence[tuple[dict[str, str], int]], inputs: Sequence[str]) -> int:
    """How many samples of `others` ((signature, samples with that program)) give the same
    output as `signature` on every one of `inputs` (a missing output is a value of its own)."""
    mine = [signature.get(i) for i in inputs]
    return sum(count for other, count in others if [other.get(i) for i in inputs] == mine)


def mean_logprob(completion: Completion) -> float:
    return sum(completion.logprobs) / len(completion.logprobs) if completion.logprobs else float("-inf")


Candidate = tuple  # (Target, its signature, how many of the round's samples wrote that program)


def choose(previous: Candidate | None, candidates: Sequence[Candidate], inputs: Sequence[str]) -> Target | None:
    """The problem's target among this round's passing answers (`candidates`, each program
    once) and `previous` (the current target, its signature on the same inputs): the one that
    the most other passing samples agree with, ties by mean log-prob; `previous` unless beaten
    strictly."""
    pool = [*candidates, *([previous] if previous is not None else [])]
    if not pool:
        return None
    scored = []
    for i, (target, sig, count) in enumerate(pool):
        others = [(s, c) for j, (_, s, c) in enumerate(pool) if j != i] + [(sig, count - 1)]
        votes = agreement(sig, others, inputs)
        chosen = Target(target.problem_id, target.completion, target.code, votes, target.source)
        scored.append((votes, mean_logprob(target.completion), -i, chosen))
    best = max(scored, key=lambda row: row[:3])
    return scored[-1][3] if previous is not None and scored[-1][0] >= best[0] else best[3]


def round_targets(previous: Mapping[str, Target], data, greedy: Mapping[str, Greedy], run_batch) -> dict[str, Target]:
    """Every target after a round (`data`: its RoundData on this rank; `greedy`: its problems'
    greedy answers after the update): a problem whose greedy answer passes takes it, the others
    `choose` among their passing samples and their previous target; problems not in the round
    keep theirs. The previous targets run on the round's proposed inputs in one batch."""
    out, sigs = dict(previous), signatures(data.triples)
    inputs = {p.problem_id: _inputs(data.triples, p.problem_id) for p in data.problems}
    pools = {p.problem_id: _candidates(data, p.problem_id, sigs) for p in data.problems}
    rerun = [pid for pid in pools if pid in previous and not _greedy_passes(greedy, pid)]
    calls = [(pid, args) for pid in rerun for args in inputs[pid].values()]
    results = iter(run_batch([ExecCall(previous[pid].code, _entry(data, pid), args) for pid, args in calls]) if calls else [])
    prev_sigs = {pid: {lit: to_literal(r.value) for lit, r in zip(inputs[pid], results) if r.ok} for pid in rerun}
    for pid, pool in pools.items():
        if _greedy_passes(greedy, pid):
            g = greedy[pid]
            out[pid] = Target(pid, g.completion, g.program.code, 0, GREEDY)
            continue
        prev, current = previous.get(pid), None
        if prev is not None:  # the current target, with the samples that wrote it again this round
            again = [c for c in pool if code_key(c[0].code) == code_key(prev.code)]
            current = (prev, again[0][1] if again else prev_sigs.get(pid, {}), 1 + sum(c[2] for c in again))
            pool = [c for c in pool if code_key(c[0].code) != code_key(prev.code)]
        chosen = choose(current, pool, sorted(inputs[pid]))
        if chosen is not None:
            out[pid] = chosen
    return out


def _greedy_passes(greedy: Mapping[str, Greedy], pid: str) -> bool:
    g = greedy.get(pid)
    return g is not None and g.passes and g.program is not None


def _inputs(triples: Sequence[IOTriple], pid: str) -> dict[str, tuple]:
    """The problem's proposed inputs, literal text -> arguments."""
    return {to_literal(t.args): t.args for t in triples if t.problem_id == pid and t.input_source == "proposed"}


def _entry(data, pid: str) -> str:
    return next(p.entry_point for p in data.problems if p.problem_id == pid)


def _candidates(data, pid: str, sigs: Mapping[str, dict]) -> list[Candidate]:
    """This round's passing programs of a problem, each once (its first sample), with its
    signature and how many samples wrote it (phase 1 checked one of each syntax tree)."""
    programs = {p.program_id: p for p in data.program_candidates}
    passing = {code_key(programs[i].code): i for i in data.visible_passing if i in programs and programs[i].problem_id == pid}
    first: dict[str, list] = {}
    for i, completion in enumerate(data.program_completions.get(pid, ())):
        prog = programs.get(f"{pid}#p{i}")
        key = code_key(prog.code) if prog is not None else None
        if key in passing:
            first.setdefault(key, [Target(pid, completion, prog.code, 0, FOUND), sigs.get(passing[key], {}), 0])[2] += 1
    return [tuple(c) for c in first.values()]


def to_state(targets: Mapping[str, Target]) -> dict:
    """The targets as plain values (the checkpoint's `targets`)."""
    return {pid: {**asdict(t), "completion": asdict(t.completion)} for pid, t in targets.items()}


def from_state(state: Mapping[str, dict]) -> dict[str, Target]:
    """`to_state`'s inverse (lists back to tuples)."""
    done = lambda c: Completion(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()})  # noqa: E731
    return {pid: Target(**{**t, "completion": done(t["completion"])}) for pid, t in state.items()}
