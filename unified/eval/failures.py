"""Why a completion fails its hidden tests: one class per evaluated completion, and a gain
split into the flips that fixed the answer's form and the ones that fixed what it computes.

Classes, decided from the program extraction and the sandbox's results (not from text
heuristics alone):

    no_code       nothing that looks like code
    syntax        code, but none of it parses
    entry_point   it parses, but defines no function of the entry point's name
    exception     it ran and raised (or was banned, crashed, ran out of memory) on some case
    timeout       it ran past its time on some case (and raised on none)
    wrong_answer  it returned a value on every case, and some value is wrong
    pass          every hidden case right

The first three are **format** (a small model's usual RL gain: a code block, the right
name, no prose); the next three are **logic** (the program ran and did the wrong thing).
A program that raises on one case and times out on another is an `exception`: raising
says more about what it does than running long.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

from unified.eval.gain_stats import flipped

CLASSES = ("no_code", "syntax", "entry_point", "exception", "timeout", "wrong_answer", "pass")
FORMAT = ("no_code", "syntax", "entry_point")
LOGIC = ("exception", "timeout", "wrong_answer")
_EXTRACTION = {"no_code": "no_code", "syntax": "syntax", "no_entry_point": "entry_point"}
_TIMED_OUT = ("timeout",)


def extraction_class(reason: str) -> str:
    """The class of a completion no program could be read from (`extract_program`'s reason)."""
    return _EXTRACTION[reason]


def run_class(statuses: Sequence[str], right: Sequence[bool]) -> str:
    """The class of a program from its results on the hidden cases: each case's sandbox
    status and whether its value was right (False where it returned none)."""
    if statuses and all(s == "ok" for s in statuses) and all(right):
        return "pass"
    failed = [s for s in statuses if s != "ok"]
    if any(s not in _TIMED_OUT for s in failed):
        return "exception"
    return "timeout" if failed else "wrong_answer"


def counts(classes: Mapping[str, str | None]) -> dict[str, int]:
    """How many problems fall in each class (every class listed, zeros included)."""
    seen = Counter(c for c in classes.values() if c is not None)
    return {c: seen.get(c, 0) for c in CLASSES}


def flip_classes(
    before: Mapping[str, str | None],
    after: Mapping[str, str | None],
    control: Mapping[str, float | None],
    trained: Mapping[str, float | None],
) -> dict:
    """Every flip between the control and a trained model with its class before and after;
    the gained flips split into format fixes and logic fixes (by the class before), and the
    NET split (`net_format`, `net_logic`): gained by that kind of fix minus lost to that kind
    of failure (a lost problem by its class after)."""
    gained, lost = flipped(control, trained)
    row = lambda p: {"problem": p, "before": before.get(p), "after": after.get(p)}  # noqa: E731
    fixed = {kind: sum(before.get(p) in kind for p in gained) for kind in (FORMAT, LOGIC)}
    broke = {kind: sum(after.get(p) in kind for p in lost) for kind in (FORMAT, LOGIC)}
    return {
        "gained": [row(p) for p in gained],
        "lost": [row(p) for p in lost],
        "gained_format_fixes": fixed[FORMAT],
        "gained_logic_fixes": fixed[LOGIC],
        "gained_unclassified": len(gained) - fixed[FORMAT] - fixed[LOGIC],
        "net_format": fixed[FORMAT] - broke[FORMAT],
        "net_logic": fixed[LOGIC] - broke[LOGIC],
    }


def gain_split(per_seed: Sequence[Mapping]) -> dict[str, float] | None:
    """Net problems gained by format fixes and by logic fixes, the mean over seeds of
    `flip_classes`' `net_format` / `net_logic` (None without a classified seed)."""
    if not per_seed:
        return None
    return {
        "format": sum(f["net_format"] for f in per_seed) / len(per_seed),
        "logic": sum(f["net_logic"] for f in per_seed) / len(per_seed),
    }
