"""Argument types read off Python call literals, applied to JSON values.

JSON has no tuples or sets: MBPP+ stores them as lists. Rather than a per-task table, the
types come from code that calls the entry point with real Python literals (MBPP+'s
`assertion` field, a prompt's examples): each argument's shape (tuple / set / list / dict,
recursively) becomes a template applied to every JSON input of the task.
"""

from __future__ import annotations

import ast


def template_of(value):
    """The container shape of a literal: 'tuple'/'set'/'list' nodes with child templates."""
    if isinstance(value, tuple):
        return ("tuple", [template_of(v) for v in value])
    if isinstance(value, (set, frozenset)):
        return ("set", [template_of(v) for v in sorted(value, key=repr)[:1]])
    if isinstance(value, list):
        return ("list", [template_of(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [template_of(v) for v in list(value.values())[:1]])
    if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
        return ("number", [])  # MBPP+ writes some numbers (complex ones) as strings
    return None


def child_template(children: list, index: int):
    if not children:
        return None
    return children[index] if index < len(children) else children[0]


def apply_template(value, template):
    """Turn JSON lists into the tuples/sets the template says, recursively."""
    if template is None:
        return value
    kind, children = template
    if kind == "number" and isinstance(value, str):
        for parse in (int, float, complex):
            try:
                return parse(value.replace(" ", ""))
            except ValueError:
                continue
        return value
    if kind in ("tuple", "list", "set") and isinstance(value, (list, tuple)):
        items = []
        for i, v in enumerate(value):
            child = child_template(children, i)
            if child is None and kind == "tuple" and isinstance(v, list):
                child = ("tuple", [])  # lists nested in a tuple argument are tuples too
            items.append(apply_template(v, child))
        if kind == "tuple":
            return tuple(items)
        if kind == "set":
            try:
                return set(items)
            except TypeError:
                return items
        return items
    if kind == "dict" and isinstance(value, dict):
        return {k: apply_template(v, child_template(children, 0)) for k, v in value.items()}
    return value


def calls_of(source: str, entry_point: str) -> list[tuple]:
    """Positional-argument tuples of every `entry_point(...)` call in assertion code."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point and not node.keywords:
            try:
                calls.append(tuple(ast.literal_eval(arg) for arg in node.args))
            except (ValueError, SyntaxError, TypeError):
                continue
    return calls


def arg_templates(calls: list[tuple]):
    return [template_of(arg) for arg in calls[0]] if calls else []
