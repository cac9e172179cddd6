"""Where a completion's answer ends (unified/text/stops.py): generation stops there and the
answer's reader reads exactly what it read from the whole completion."""

import pytest

from unified.text.extract import answer_text, extract_program
from unified.text.stops import FENCE_END, TAG_END, AnswerEnd, answer_end, cut, for_answer

CODE = AnswerEnd(FENCE_END, "add")
TAG = AnswerEnd(TAG_END)

# completions of the shapes SmolLM2 writes (tests/text: hand-made after saved solve rollouts)
CODE_COMPLETIONS = {
    "demo after the answer": "```python\ndef add(a, b):\n    return a + b\n```\n\nExample:\n```python\nprint(add(1, 2))\n```\n",
    "bare opening fence": "Here it is:\n```\ndef add(a, b):\n    return a + b\n```\nThis adds.\n",
    "placeholder block first": "```python\n# Your code here\n```\n```python\ndef add(a, b):\n    return a + b\n```\nDone\n",
    "broken first try": "```python\ndef add(a, b):\n    return a +\n```\nFixed:\n```python\ndef add(a, b):\n    return a + b\n```\nok\n",
    "helper under another name first": "```python\ndef plus(a, b):\n    return a + b\n```\nNow:\n```python\ndef add(a, b):\n    return plus(a, b)\n```\n\n",
    "never closed": "```python\ndef add(a, b):\n    return a + b\n",
    "closed at the very end": "```python\ndef add(a, b):\n    return a + b\n```",
    "prose only": "I cannot do that.\n```\n",
}


@pytest.mark.parametrize("name", sorted(CODE_COMPLETIONS))
def test_stopping_at_the_answer_end_never_changes_the_program_read(name):
    text = CODE_COMPLETIONS[name]
    assert extract_program(cut(text, CODE), "add") == extract_program(text, "add")


def test_the_code_answer_ends_at_the_fence_that_closes_the_entry_points_block():
    text = CODE_COMPLETIONS["demo after the answer"]
    assert cut(text, CODE) == "```python\ndef add(a, b):\n    return a + b\n```\n"
    placeholder = CODE_COMPLETIONS["placeholder block first"]
    assert cut(placeholder, CODE).endswith("return a + b\n```\n") and "Done" not in cut(placeholder, CODE)
    helper = CODE_COMPLETIONS["helper under another name first"]
    assert cut(helper, CODE).endswith("return plus(a, b)\n```\n")
    assert cut(helper, AnswerEnd(FENCE_END)).endswith("return a + b\n```\n")  # any function: the first block


def test_a_fence_that_opens_a_block_or_closes_no_program_ends_nothing():
    for name in ("never closed", "closed at the very end", "prose only"):
        assert answer_end(CODE_COMPLETIONS[name], CODE) is None
        assert cut(CODE_COMPLETIONS[name], CODE) == CODE_COMPLETIONS[name]
    opening = CODE_COMPLETIONS["bare opening fence"]
    assert cut(opening, CODE) == opening[: opening.index("This adds.")]


def test_a_tagged_answer_ends_at_the_closing_tag_and_a_block_inside_it_does_not_end_it():
    induction = "<answer>\n```python\ndef add(a, b):\n    return a + b\n```\n</answer>\nThat is all."
    assert cut(induction, TAG) == induction[: induction.index("\nThat")]
    assert cut(induction, CODE) == induction  # the fence sits inside an open tag
    deduction = "The call returns 3.\n<answer>3</answer>\n\nBecause 1 + 2 = 3."
    assert cut(deduction, TAG) == "The call returns 3.\n<answer>3</answer>"
    assert answer_text(cut(deduction, TAG)) == answer_text(deduction) == "3"
    stray = "</answer> first, then <answer>4</answer> trailing"
    assert cut(stray, TAG) == stray[: stray.index(" trailing")]  # a stray closing tag balances nothing


def test_kinds_get_their_answer_end_and_any_other_marker_is_a_plain_stop_string():
    assert for_answer(True, "f") == AnswerEnd(FENCE_END, "f") and for_answer(False, "f") == AnswerEnd(TAG_END)
    assert cut("abc STOP def STOP", AnswerEnd("STOP")) == "abc STOP"
    assert cut("text", None) == "text"
    with pytest.raises(ValueError, match="non-empty marker"):
        AnswerEnd("")
