"""Reading model text: code extraction, answers, proposed inputs (pure, no sandbox)."""

from pathlib import Path

from unified.text.extract import (
    answer_text,
    call_args,
    code_key,
    extract_code,
    extract_program,
    proposed_inputs,
    shape_like,
)


def test_fenced_code_with_chatter_keeps_only_definitions():
    text = (
        "Sure! Here is my solution:\n```python\nimport math\n\ndef f(x):\n    return math.floor(x) + 1\n\n"
        "print(f(2))\nassert f(1) == 2\n```\nIt adds one."
    )
    code = extract_code(text, "f")
    assert code == "import math\ndef f(x):\n    return math.floor(x) + 1\n"


def test_bare_def_with_chatter_before_and_after():
    text = "Here you go\ndef f(x):\n    return x * 2\nThis doubles x, as asked."
    assert extract_code(text, "f") == "def f(x):\n    return x * 2\n"


def test_unclosed_fence_from_a_truncated_completion():
    assert extract_code("```python\ndef f(x):\n    return x", "f") == "def f(x):\n    return x\n"


def test_picks_the_block_that_defines_the_entry_point():
    text = "```python\nprint('hello')\n```\nand\n```py\ndef helper():\n    return 1\ndef f():\n    return helper()\n```"
    assert extract_code(text, "f") == "def helper():\n    return 1\ndef f():\n    return helper()\n"


def test_decorators_and_constants_are_kept():
    code = extract_code("LIMIT = 3\n@staticmethod\ndef f(x):\n    return LIMIT\n", "f")
    assert code == "LIMIT = 3\n@staticmethod\ndef f(x):\n    return LIMIT\n"


def test_failure_reasons():
    assert extract_program("I do not know.", "f") == (None, "no_code")
    assert extract_program("```python\ndef f(x:\n    return\n```", "f") == (None, "syntax")
    assert extract_program("```python\ndef g(x):\n    return x\n```", "f") == (None, "no_entry_point")


def test_code_key_ignores_formatting_and_comments():
    assert code_key("def f(x):\n    return x+1  # one") == code_key("def f( x ):\n\n    return (x + 1)\n")
    assert code_key("def f(x):\n    return x+1") != code_key("def f(x):\n    return x+2")


def test_answer_text_takes_the_last_block_and_strips_fences():
    assert answer_text("I think <answer>1</answer> no wait <answer>[1, 2]</answer>") == "[1, 2]"
    assert answer_text("<answer>\n```python\ndef f():\n    return 1\n```\n</answer>") == "def f():\n    return 1"
    assert answer_text("```python\n(1, 2)\n```") == "(1, 2)"  # no tags: the last fence
    assert answer_text("just prose") is None
    assert answer_text("<answer>unterminated") == "unterminated"  # a forgotten </answer> runs to the end
    assert answer_text("<answer>   ") is None
    # a closing tag inside the answer's own string literal survives
    assert answer_text("<answer>'</answer>'</answer>") == "'</answer>'"


def test_call_args_forms_and_reasons():
    assert call_args("f((1, 2), [3])", "f", 2) == (((1, 2), [3]), None)
    assert call_args("((1, 2), [3])", "f", 2) == (((1, 2), [3]), None)  # a bare tuple of arguments
    assert call_args("[1, 2]", "f", 1) == (([1, 2],), None)  # one argument: the literal itself
    assert call_args("f(1, 2)", "f", 1) == (None, "wrong_arity")
    assert call_args("g(1)", "f", 1) == (None, "not_a_literal")
    assert call_args("f(x)", "f", 1) == (None, "not_a_literal")
    assert call_args("f(1", "f", 1) == (None, "syntax")


def test_literals_are_never_evaluated(tmp_path: Path):
    marker = tmp_path / "pwned"
    payload = f"f(__import__('os').system('touch {marker}'))"
    assert call_args(payload, "f", 1) == (None, "not_a_literal")
    assert [r[1] for r in proposed_inputs(payload, "f", 1)] == ["not_a_literal"]
    assert not marker.exists()


def test_proposed_inputs_one_per_line_in_a_fence():
    text = "Here are some inputs:\n```python\nf([1, 2], [3])\nf((4,), (5, 6))\n# a comment\nf(a, b)\n```\nHope this helps"
    got = proposed_inputs(text, "f", 2)
    assert [(args, reason) for args, reason, _ in got] == [
        (([1, 2], [3]), None),
        (((4,), (5, 6)), None),
        (None, "not_a_literal"),
    ]


def test_proposed_inputs_without_fence_skip_prose():
    got = proposed_inputs("Inputs:\nf(1)\nf('a')\nsome prose here\n3", "f", 1)
    assert [args for args, _, _ in got] == [(1,), ("a",), (3,)]


def test_shape_like_follows_visible_argument_types():
    # Mbpp/2 takes two tuples; a model writes lists
    assert shape_like(([1, 2], [3]), [((3, 4), (5, 6))]) == ((1, 2), (3,))
    # Mbpp/63 takes a list of tuples
    assert shape_like(([[1, 2], [3, 4]],), [([(3, 5), (1, 7)],)]) == ([(1, 2), (3, 4)],)
    assert shape_like(([1, 2],), []) == ([1, 2],)


def test_truncated_fence_keeps_the_complete_functions_before_the_cut():
    from unified.text.extract import sanitize

    text = "Sure:\n```python\nimport math\n\ndef f(x):\n    return math.floor(x)\n\ndef g(y):\n    return [y for y in"
    assert extract_code(text, "f") == "import math\ndef f(x):\n    return math.floor(x)\n"
    assert "def f(x):" in sanitize(text, "f") and "def g" not in sanitize(text, "f")
    assert sanitize("no code at all", "f") is None


def test_sanitize_keeps_the_last_of_two_definitions_as_running_the_program_does():
    from unified.text.extract import sanitize

    text = "```python\ndef f(x):\n    return 1\n\ndef f(x):\n    return 2\n```"
    code = sanitize(text, "f")
    scope: dict = {}
    exec(compile(code, "<test>", "exec"), scope)  # trusted test text, not model output
    assert scope["f"](0) == 2
    assert sanitize("def g(x):\n    return x\n\ndef f(x):\n    return g(x)\n", "f").count("def ") == 2  # one of each: unchanged
