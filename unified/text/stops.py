"""Where a completion's answer ends, so generation can stop there (issue: time to a gain).

A kind's answer ends at a marker (`for_answer`): a bare code answer (`solve`, phase 1's
programs) at the fence line that closes its ```python block, a tagged answer (`<answer>`
... `</answer>`: deduction, abduction, induction) at the closing tag. A completion stops at
the first match of its marker that *closes the answer* (`answer_end`):
- a closing tag, when an answer tag was opened and the tags balance;
- a fence line, when an even number of fence lines came before it (a bare ``` that OPENS a
  block ends nothing), no `<answer>` tag is open, and the block it closes parses and
  defines the entry point. A block of demo calls, a `# Your code here` placeholder, a
  helper under another name or a broken first try is followed by the answer often enough
  to keep going: on 1,600 saved SmolLM2 solve completions this rule changes no extracted
  program, where stopping at the first closed fence changed 29 (one a passing answer).
Everything the answer's reader (`text.extract`) reads is before that point; the tokens
after it (a demo call, its "output", an explanation) are what stopping saves.

The engine asks vLLM to stop at the marker string (`SamplingParams.stop`, the string kept)
and, where the match did not close the answer, continues the same completion from its
tokens: the completions keep the distribution of the unstopped ones up to the answer's end.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

FENCE_END = "\n```\n"  # a fence line after a line break; a ```python line never matches it
TAG_END = "</answer>"
ANSWER_ENDS = (FENCE_END, TAG_END)


@dataclass(frozen=True)
class AnswerEnd:
    """Where one request's answer ends: `marker` (FENCE_END, TAG_END, or any other string:
    a plain stop string, its first match ends the answer), and for a code answer the
    function it must define (`entry_point`; "" for any function)."""

    marker: str
    entry_point: str = ""

    def __post_init__(self):
        if not self.marker:
            raise ValueError("an answer end needs a non-empty marker")


def for_answer(raw_answer: bool, entry_point: str = "") -> AnswerEnd:
    """A kind's answer end: a raw answer is a bare code block (the closing fence), every
    other answer sits inside `<answer>` tags (the closing tag)."""
    return AnswerEnd(FENCE_END, entry_point) if raw_answer else AnswerEnd(TAG_END)


def closes(prefix: str, end: AnswerEnd) -> bool:
    """Whether `prefix` (a completion up to and including a match of `end.marker`) has
    closed its answer at that match."""
    if end.marker == TAG_END:
        return 0 < prefix.count("<answer>") <= prefix.count(TAG_END)
    if end.marker != FENCE_END:
        return True
    if prefix.count("<answer>") > prefix.count(TAG_END):
        return False  # a block inside an open answer tag: the tag ends the answer
    lines = prefix.splitlines()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    return len(fences) % 2 == 0 and _defines("\n".join(lines[fences[-2] + 1 : fences[-1]]), end.entry_point)


def _defines(code: str, entry_point: str) -> bool:
    """The block is a program: it parses and defines `entry_point` (any function when "")
    at its top level (a block of example calls, a placeholder, a helper under another name
    or a broken first try is not the answer yet)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == (entry_point or node.name)
        for node in tree.body
    )


def answer_end(text: str, end: AnswerEnd) -> int | None:
    """The index just past the first match of `end.marker` in `text` that closes the
    answer (the completion's length once stopped there), or None if no match does."""
    start = 0
    while (found := text.find(end.marker, start)) >= 0:
        stop = found + len(end.marker)
        if closes(text[:stop], end):
            return stop
        start = found + 1
    return None


def cut(text: str, end: AnswerEnd | None) -> str:
    """`text` as it would read had generation stopped at its answer's end."""
    stop = None if end is None else answer_end(text, end)
    return text if stop is None else text[:stop]
