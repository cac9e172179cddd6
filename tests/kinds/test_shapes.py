"""Answer shapes as grammars (xgrammar's own matcher, no model): each accepts the answers its
kind's parser reads, gold answers included, and refuses what the kind could not read."""

from __future__ import annotations

import pytest

from unified.kinds import KINDS, BuildOptions, shapes
from unified.pipeline.rewards import parse_answer
from unified.text.extract import proposed_inputs
from unified.types import IOTriple, Problem, Program, TestCase
from unified.values import to_literal

accepts = pytest.importorskip("xgrammar.testing")._is_grammar_accept_string
FENCE = "```"
VALUES = [
    0,
    -7,
    2.5,
    1e-05,
    -0.125,
    float("inf"),
    "it's",
    'say "hi"',
    "a\nb",
    "",
    True,
    None,
    [],
    (),
    (1,),
    (1, "x"),
    [1, [2, (3, 4)]],
    {"a": [1, 2]},
    {},
    {1, 2},
    set(),
    {"k": {"n": None}},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_every_literal_the_project_writes_is_inside_the_deduction_shape(value):
    text = f"<answer>{to_literal(value)}</answer>"
    assert accepts(shapes.literal_answer(), text), text


@pytest.mark.parametrize(
    "text",
    [
        "<answer>[1, 2</answer>",
        "<answer>x</answer>",
        "[1]",
        "<answer>1</answer> and more",
        "<answer>f(1)</answer>",
        "<answer>1 + 2</answer>",
    ],
)
def test_the_deduction_shape_refuses_what_is_not_one_literal(text):
    assert not accepts(shapes.literal_answer(), text)


def test_the_abduction_shape_is_a_call_of_the_entry_point_with_its_arity():
    g = shapes.call_answer("pair_up", 2)
    assert accepts(g, "<answer>pair_up([1, 2], 'a')</answer>")
    for bad in ("<answer>pair_up([1, 2])</answer>", "<answer>other(1, 2)</answer>", "<answer>pair_up(1, 2, 3)</answer>"):
        assert not accepts(g, bad), bad
    assert accepts(shapes.call_answer("nothing", 0), "<answer>nothing()</answer>")


def test_code_shapes_define_the_entry_point_with_a_body():
    body = "def f(a, b):\n    import math\n\n    return math.gcd(a, b)\n\ndef helper():\n    return 1\n"
    assert accepts(shapes.code_answer("f", tagged=False), f"{FENCE}python\n{body}{FENCE}")
    assert accepts(shapes.code_answer("f", tagged=True), f"<answer>\n{FENCE}python\n{body}{FENCE}\n</answer>")
    for bad in (
        f"{FENCE}python\ndef f(a):\n{FENCE}",  # no body
        f"{FENCE}python\ndef f(a):\n    # your code here\n{FENCE}",  # a comment for a body
        f"{FENCE}python\ndef g(a):\n    return a\n{FENCE}",  # another name
        f"Here you go:\n{FENCE}python\ndef f(a):\n    return a\n{FENCE}",  # chatter first
        f"{FENCE}python\ndef f(a):\n    return a\n{FENCE}\nThis returns a.",
    ):  # chatter after
        assert not accepts(shapes.code_answer("f", tagged=False), bad), bad


def test_input_lines_are_count_calls_that_phase_2_reads():
    g = shapes.input_lines("f", 2, 3)
    text = f"{FENCE}python\nf([1, 2], 'a')\nf((), None)\nf(-1.5, {{1: 2}})\n{FENCE}"
    assert accepts(g, text)
    assert [args for args, _, _ in proposed_inputs(text, "f", 2)] == [([1, 2], "a"), ((), None), (-1.5, {1: 2})]
    assert not accepts(g, f"{FENCE}python\nf(1, 2)\n{FENCE}")  # too few


PROBLEM = Problem(
    "P/1", "mbpp", "Write a function that returns the shared items of two tuples.", "shared", (TestCase(((1, 2), (2, 3)), (2,)),)
)
PROGRAM = Program("P/1", "P/1#p0", "def shared(a, b):\n    return tuple(x for x in a if x in b)\n", "shared")
TRIPLES = [
    IOTriple("P/1", "P/1#p0", ((1, 2), (2, 3)), (2,), "visible"),
    IOTriple("P/1", "P/1#p0", (("a",), ()), (), "proposed"),
    IOTriple("P/1", "P/1#p0", ((1.5, 2), (1.5,)), (1.5,), "proposed"),
]


@pytest.mark.parametrize("kind", ["deduction", "abduction", "induction"])
def test_each_self_play_kinds_gold_is_inside_its_shape_and_parses(kind):
    tasks, _ = KINDS[kind].build(PROBLEM, PROGRAM, TRIPLES, BuildOptions())
    assert tasks
    for task in tasks:
        assert accepts(KINDS[kind].answer_shape(task), task.gold), task.gold
        assert parse_answer(task, task.gold)[1] is None


def test_the_solve_shape_holds_its_gold():
    (task,), _ = KINDS["solve"].build_problem(PROBLEM, [PROGRAM], [], BuildOptions())
    assert accepts(KINDS["solve"].answer_shape(task), task.gold) and parse_answer(task, task.gold)[1] is None


def _entry_point_first(source: str, entry_point: str) -> str:
    """A reference solution as a code shape starts: its entry point's definition first (the
    rest after it), in ast.unparse's 4-space layout."""
    import ast

    nodes = ast.parse(source).body
    first = [n for n in nodes if isinstance(n, ast.FunctionDef) and n.name == entry_point]
    return "\n".join(ast.unparse(n) for n in first + [n for n in nodes if n not in first]) + "\n"


def _reference_solutions():
    from unified.benchmarks import humaneval, mbpp

    for row in mbpp.rows():
        yield row["task_id"], row["entry_point"], _entry_point_first(row["canonical_solution"], row["entry_point"])
    for row in humaneval.rows():  # the prompt (signature, docstring with its examples) and the body as written
        source = row["prompt"] + row["canonical_solution"]
        yield row["task_id"], row["entry_point"], _entry_point_first(source, row["entry_point"])
        start = source.find(f"def {row['entry_point']}(")
        if "```" not in source and source[start:].count("\ndef ") == 0:  # one function, its own layout and comments
            yield row["task_id"] + " as written", row["entry_point"], source[start:].rstrip("\n") + "\n"


def test_every_reference_solution_of_both_benchmarks_is_inside_the_code_shape():
    solutions = list(_reference_solutions())
    refused = [
        tid
        for tid, entry, code in solutions
        if not accepts(shapes.code_answer(entry, tagged=False), f"{FENCE}python\n{code}{FENCE}")
    ]
    assert len(solutions) > 560 and refused == []


@pytest.mark.parametrize(
    "body",
    [
        "    return \"(\" + x + ']'  # it's a bracket ( in a comment\n",
        "    y = [\n        1,  # first (\n        2,\n    ]\n    return {k: (v,) for k, v in zip(y, x)}\n",
        '    """A docstring: it\'s ( ] "quoted", with `code` in it.\n\n    More lines.\n    """\n    return x\n',
        "    s = f'{x!r:>{3}}' + r'\\d(' + b'['.decode()\n    return s\n",
        "    return x \\\n        + 1\n",
    ],
)
def test_the_code_shape_keeps_brackets_strings_comments_and_lines_as_python_writes_them(body):
    text = f"{FENCE}python\ndef f(x):\n{body}{FENCE}"
    assert accepts(shapes.code_answer("f", tagged=False), text), text
    import ast

    ast.parse(text.split("\n", 1)[1].rsplit(FENCE, 1)[0])  # and they are Python
