"""Reading model text: code from completions, answers from `<answer>` tags, literal inputs.

All pure functions. Literals are read by `values.from_literal` (an AST walk like
`ast.literal_eval`), never `eval`: a model's text is never run in this process
(programs run only in the sandbox).

Code extraction accepts ```python fences (also unclosed ones, as a truncated completion
leaves them: the longest prefix that parses is kept, so a complete function before the
cut survives), or bare `def`s with chatter around them. The kept code is the top-level
imports, defs, classes and constant assignments: a model's demo calls, prints and asserts
are dropped, so running the program only defines things.

`sanitize` is for scoring existing samples: EvalPlus's own sanitizer
(`evalplus.sanitize.sanitize`: the longest span of lines that parses, then the imports and
the definitions the entry point reaches) when the package is installed and the text is
short enough for its quadratic search; `extract_code` otherwise, and always when the program
defines a function twice: EvalPlus's sanitizer keeps the FIRST definition, while running
the program (our evaluation, and EvalPlus's own when it executes a solution) keeps the
LAST, so both scorers read a program the way it runs.
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

from unified.text.arg_types import apply_template, template_of
from unified.values import LiteralError, from_literal

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_CODE_START = re.compile(r"^(def |async def |class |import |from \S+ import |@|[A-Za-z_]\w*\s*=[^=])")
_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
MAX_TEXT_CHARS = 20_000  # longer model text is cut before parsing (parse cost is superlinear)
SANITIZER_MAX_LINES = 150  # EvalPlus's sanitizer parses every span of lines: O(lines^2) parses


def _parses(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _defines(tree: ast.Module, entry_point: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry_point for n in tree.body)


def _top_level_code(code: str, tree: ast.Module) -> str:
    """Only the statements that define things, with their original text."""
    lines = code.splitlines()
    kept = []
    for node in tree.body:
        if not isinstance(node, _KEEP):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        kept.append("\n".join(lines[first - 1 : node.end_lineno]))
    return "\n".join(kept).strip() + "\n"


def _bare_candidates(text: str) -> list[str]:
    """From the first code-looking line to the end, then shorter and shorter (chatter after)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return []
    body = lines[start:]
    return ["\n".join(body[:end]) for end in range(len(body), 0, -1)][:200]


def _prefixes(block: str) -> list[str]:
    """A fenced block as it is, then shorter and shorter (a completion cut off mid-block)."""
    lines = block.splitlines()
    return [block] + ["\n".join(lines[:end]) for end in range(len(lines) - 1, 0, -1)][:200]


def extract_program(text: str, entry_point: str) -> tuple[str | None, str | None]:
    """(code, None) or (None, reason) with reason in "no_code" | "syntax" | "no_entry_point"."""
    text = text[:MAX_TEXT_CHARS]
    fenced = [c for block in _FENCE.findall(text) for c in (_prefixes(block) if _parses(block) is None else [block])]
    candidates = fenced + _bare_candidates(_FENCE.sub("", text))
    if not candidates:
        return None, "no_code"
    reason = "syntax"
    for code in candidates:
        tree = _parses(code)
        if tree is None:
            continue
        if _defines(tree, entry_point):
            return _top_level_code(code, tree), None
        reason = "no_entry_point"
    return None, reason


def extract_code(text: str, entry_point: str) -> str | None:
    """The program in a completion that defines `entry_point`, or None."""
    return extract_program(text, entry_point)[0]


def sanitize(text: str, entry_point: str) -> str | None:
    """The program in a sample, recovered as EvalPlus's sanitizer does (see module doc), or
    None when nothing that defines `entry_point` is found."""
    text = text[:MAX_TEXT_CHARS]
    ours = extract_code(text, entry_point)
    if ours is not None and _defines_twice(ours):
        return ours  # the last definition wins, as when the program runs
    if text.count("\n") < SANITIZER_MAX_LINES:
        try:
            from evalplus.sanitize import sanitize as evalplus_sanitize
        except ImportError:  # the package is optional here: our own extraction below
            evalplus_sanitize = None
        if evalplus_sanitize is not None:
            try:
                code = evalplus_sanitize(text, entry_point)
            except (RecursionError, ValueError, MemoryError):
                code = ""
            tree = _parses(code)
            if tree is not None and _defines(tree, entry_point):
                return code.strip() + "\n"
    return ours


def _defines_twice(code: str) -> bool:
    tree = _parses(code)
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] if tree else []
    return len(names) != len(set(names))


def code_key(code: str) -> str:
    """Equal for programs that differ only in formatting or comments (dedup key)."""
    tree = _parses(code)
    return ast.dump(tree) if tree is not None else code


def import_lines(source: str) -> list[str]:
    """The top-level import statements of `source` if it is code (HumanEval prompts), else []."""
    tree = _parses(source)
    if tree is None:
        return []
    return [ast.get_source_segment(source, n) or "" for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


# ---------------------------------------------------------------- answers


def answer_text(text: str) -> str | None:
    """What is inside the last `<answer>` ... the last `</answer>` (so a closing tag inside an
    answer's string literal survives); else the last fenced block; code fences inside an
    answer are removed. An `<answer>` never closed (small models often forget the tag, or
    close a fence instead) runs to its first fenced block, or else to the next fence."""
    text = text[:MAX_TEXT_CHARS]
    start = text.rfind("<answer>")
    if start >= 0:
        end = text.rfind("</answer>")
        if end < start:
            rest = text[start + len("<answer>") :]
            fenced = _FENCE.findall(rest)
            inner = fenced[0] if fenced else rest.split("```")[0]
            return inner.strip() or None
        inner = text[start + len("<answer>") : end]
        fenced = _FENCE.findall(inner)
        return (fenced[-1] if fenced else inner).strip()
    fenced = _FENCE.findall(text)
    return fenced[-1].strip() if fenced else None


def read_literal(text: str) -> tuple[bool, object]:
    """(True, value) when `text` is one Python literal, else (False, None). Reads what
    `values.to_literal` writes (also nan/inf, set(), frozenset(...)); never evaluates."""
    try:
        return True, from_literal(text.strip())
    except (LiteralError, MemoryError, RecursionError):
        return False, None


def call_args(text: str, entry_point: str, arity: int | None) -> tuple[tuple | None, str | None]:
    """Positional arguments from `entry(a, b)` with literal arguments, or from a bare
    literal (the argument itself for one-argument functions, a tuple of them otherwise).
    Returns (args, None) or (None, reason) with reason "syntax" | "not_a_literal" | "wrong_arity"."""
    text = text.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None, "syntax"
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == entry_point) or node.keywords:
            return None, "not_a_literal"
        values = [read_literal(ast.get_source_segment(text, a) or "") for a in node.args]
        if not all(ok for ok, _ in values):
            return None, "not_a_literal"
        args = tuple(v for _, v in values)
    else:
        ok, value = read_literal(text)
        if not ok:
            return None, "not_a_literal"
        if arity == 1:
            args = (value,)
        elif isinstance(value, tuple):
            args = value
        else:
            return None, "wrong_arity"
    if arity is not None and len(args) != arity:
        return None, "wrong_arity"
    return args, None


def proposed_inputs(text: str, entry_point: str, arity: int | None) -> list[tuple[tuple | None, str | None, str]]:
    """Inputs a model proposed: one call or literal per line (fences and chatter allowed).
    Per candidate line: (args, None, line) or (None, reason, line)."""
    fenced = _FENCE.findall(text[:MAX_TEXT_CHARS])
    body = "\n".join(fenced) if fenced else text[:MAX_TEXT_CHARS]
    out = []
    for raw in body.splitlines():
        line = raw.strip().rstrip(",")
        if not line or line.startswith("#") or not _looks_like_input(line, entry_point):
            continue
        args, reason = call_args(line, entry_point, arity)
        out.append((args, reason, line))
    return out


def _looks_like_input(line: str, entry_point: str) -> bool:
    """A call of the entry point or something literal-looking, not prose."""
    return line.startswith(entry_point + "(") or line[0] in "([{'\"-0123456789" or line in ("True", "False", "None")


def declared_arity(source: str, entry_point: str) -> int | None:
    """Positional parameters of `def entry_point(...)` in `source` (a code prompt), or None
    when it declares none that parses or takes *args."""
    match = re.search(rf"^def {re.escape(entry_point)}\(.*?\).*?:", source, re.M | re.S)
    tree = _parses(match.group(0) + " pass") if match else None
    if tree is None or not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    args = tree.body[0].args
    return None if args.vararg else len(args.posonlyargs) + len(args.args)


def shape_like(args: tuple, examples: Sequence[tuple]) -> tuple:
    """Give proposed arguments the container types of the visible examples' arguments (a
    model writes lists where MBPP+ functions take tuples)."""
    if not examples:
        return args
    templates = [template_of(a) for a in examples[0]]
    return tuple(apply_template(a, templates[i]) if i < len(templates) else a for i, a in enumerate(args))
