"""The prompt of phase 1 (and of the solve kind and pass@1): a problem as the model sees it.

`program_prompt` asks for the entry point's complete function, showing a code prompt
(HumanEval: a signature and docstring) as code and a prose prompt (MBPP) with its visible
examples; `with_prompt_imports` puts back the imports a code prompt declared, which an
answer often leaves out.
"""

from __future__ import annotations

from unified.text.extract import import_lines
from unified.types import Problem
from unified.values import display_text

MAX_EXAMPLES_SHOWN = 3


def _is_code_prompt(problem: Problem) -> bool:
    """HumanEval-style prompts are a signature with a docstring, not prose."""
    return f"def {problem.entry_point}(" in problem.prompt


def display(value) -> str:
    """Literal text for prompts and logs; an abbreviated repr for a value with no literal
    form or a very large one. Bounded (`values.MAX_SHOWN` characters); never raises."""
    return display_text(value)


def example_lines(problem: Problem, limit: int = MAX_EXAMPLES_SHOWN) -> list[str]:
    """`>>> f(args)` / expected-value lines of the visible examples."""
    lines = []
    for case in problem.visible[:limit]:
        lines.append(f">>> {problem.entry_point}({', '.join(display(a) for a in case.args)})")
        if case.expected is not None:
            lines.append(display(case.expected))
    return lines


def program_prompt(problem: Problem) -> str:
    if _is_code_prompt(problem):
        return (
            "Complete the following Python function.\n\n"
            f"```python\n{problem.prompt.rstrip()}\n```\n\n"
            "Answer with the complete function (signature and body) in one ```python code block."
        )
    examples = "\n".join(example_lines(problem))
    return (
        f"{problem.prompt}\n\n"
        f"Write a Python function named `{problem.entry_point}`."
        + (f" Examples:\n{examples}\n\n" if examples else "\n\n")
        + "Answer with the complete function in one ```python code block."
    )


def with_prompt_imports(problem: Problem, code: str) -> str:
    """Prefix the imports a code prompt declares (HumanEval's `from typing import List`),
    which a model's answer often leaves out."""
    missing = [line for line in import_lines(problem.prompt) if line and line not in code]
    return "\n".join(missing + [code]) if missing else code
