"""Answer shapes: grammars an engine decodes a request's answer in, so a small model
writes answers the kinds can read (`Engine.generate(..., shapes=...)`; vLLM's structured
outputs, xgrammar's EBNF).

A kind declares the shape of its answer (`TaskKind.answer_shape`); phase 2 the shape of its
proposed inputs (`input_lines`). Every string a shape accepts is read by the kind's own
parser (`text.extract`: `read_literal`, `call_args`, `extract_program`), which tests check
string by string. Literals are written the way `values.to_literal` writes them (", " and
": " separators, either quote, numbers with sign, fraction and exponent), so a gold answer
is inside its own shape. Nothing else is allowed before or after the answer: the engine
stops at the end of the shape (EOS is the only token left), which also ends the wasted
tokens of chatter after it.
"""

from __future__ import annotations

LITERAL_RULES = r"""
literal ::= number | string | "True" | "False" | "None" | list | tuple | dict | set
number ::= "-"? ([0-9]+ ("." [0-9]*)? | "." [0-9]+) ([eE] [-+]? [0-9]+)? | "-"? "inf" | "nan"
string ::= "'" ([^'\\\n] | "\\" [^\n])* "'" | "\"" ([^"\\\n] | "\\" [^\n])* "\""
list ::= "[" (literal (", " literal)*)? "]"
tuple ::= "()" | "(" literal ",)" | "(" literal (", " literal)+ ")"
dict ::= "{" (literal ": " literal (", " literal ": " literal)*)? "}"
set ::= "set()" | "{" literal (", " literal)* "}"
"""

# after "def NAME(": the rest of the signature's line, then at least one indented statement (no
# empty or comment-only body: its first line is code), then any lines without three backticks
# in a row (they end the block). Nothing of Python's syntax beyond that is enforced: a grammar
# that balanced brackets outside strings and comments (2026-11-27) cut constrained decoding on
# the CPU from ~450 to ~40 tokens/s (xgrammar checks most tokens against its stack at run
# time) and changed no measured parse-failure rate (docs/results/README.md), so it was undone.
CODE_RULES = r"""
code ::= [^\n`]* "\n    " [^ \n`#] line line*
line ::= ([^`\n] | "`" [^`\n] | "``" [^`\n])* "\n"
"""


def _quoted(text: str) -> str:
    """An EBNF string literal for `text` (identifiers and fixed prompt text)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _arguments(arity: int) -> str:
    return ' ", " '.join(["literal"] * arity) if arity > 0 else '""'


def literal_answer() -> str:
    """`<answer>LITERAL</answer>` (deduction)."""
    return 'root ::= "<answer>" literal "</answer>"\n' + LITERAL_RULES


def call_answer(entry_point: str, arity: int) -> str:
    """`<answer>entry(LIT, ..., LIT)</answer>` with exactly `arity` arguments (abduction)."""
    return f'root ::= "<answer>" {_quoted(entry_point + "(")} {_arguments(arity)} ")</answer>"\n' + LITERAL_RULES


def code_answer(entry_point: str, tagged: bool) -> str:
    """A ```python block that starts by defining `entry_point` (imports then go inside the
    function); inside `<answer>` tags when `tagged` (induction), bare otherwise (solve, phase
    1's programs: the benchmark's own format)."""
    block = f'"```python\\n" {_quoted("def " + entry_point + "(")} code "```"'
    body = f'"<answer>\\n" {block} "\\n</answer>"' if tagged else block
    return f"root ::= {body}\n" + CODE_RULES


def input_lines(entry_point: str, arity: int, count: int) -> str:
    """Phase 2's proposal: `count` calls `entry(LIT, ...)`, one per line, in a ```python block."""
    call = f'{_quoted(entry_point + "(")} {_arguments(arity)} ")\\n"'
    return f'root ::= "```python\\n" {" ".join([call] * max(1, count))} "```"\n' + LITERAL_RULES
