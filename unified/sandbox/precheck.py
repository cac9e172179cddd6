"""What the executor decides in the parent before a call reaches a worker.

The static check (`sandbox.rules.scan`), compiling (the child only loads the code
object), the arguments' literal check, and the marshalled request. Also the expansion of
the banned-call patterns into the (module, attribute) list the worker stubs out, so the
worker needs neither `fnmatch` nor the policy module.
"""

from __future__ import annotations

import ast
import fnmatch
import marshal
import re
import sys
import warnings

from unified.sandbox.exec_types import ExecCall, ExecResult
from unified.sandbox.rules import DETERMINISM_MODULES, SandboxRules, scan
from unified.values import LiteralError, from_literal, to_literal

MAX_CODE_CHARS = 1_000_000
USER_FILE = "<sandbox>"  # the program's co_filename: how the guards recognise its frames
# The compiler's warnings on a generated program ("'int' object is not subscriptable; perhaps
# you missed a comma?") are about the model's code, not the user's: they stay out of the run's
# log (3-24 lines a seed in the confirm run), and the call still runs and fails as it would.
warnings.filterwarnings("ignore", category=SyntaxWarning, module=re.escape(USER_FILE))
# `globals` stays banned statically only: a stub would answer its own globals to the stdlib.
_BUILTIN_STUBS = ("eval", "exec", "compile", "breakpoint", "input", "exit", "quit", "help")
# raise only when the program calls them: threading and random register fork handlers as they
# are imported (platform.architecture imports subprocess, which imports threading)
_DIRECT_ONLY = frozenset(_BUILTIN_STUBS) | {"sys._getframe", "os.register_at_fork"}


def worker_stubs(policy: SandboxRules) -> tuple[list[tuple[str, str]], list[str]]:
    """(module, attribute) of every loaded-module function the patterns ban (os.exec* ->
    execv, ...), and the names that raise only when the program calls them directly. The
    worker runs the same interpreter, so this process's modules have the same names."""
    out = []
    for pattern in policy.qualified:
        module_name, _, attr_pattern = pattern.rpartition(".")
        for target in [module_name] + (["posix"] if module_name == "os" else []):
            module = sys.modules.get(target)
            for attr in dir(module) if module is not None else ():
                if fnmatch.fnmatchcase(attr, attr_pattern) and callable(getattr(module, attr)):
                    out.append((target, attr))
    direct = sorted(n for n in _DIRECT_ONLY if n in policy.builtin_names or policy.call_banned(n))
    return out, direct


def runtime_modules(banned_modules) -> tuple[str, ...]:
    """The configured bans that hold for every call: all but the determinism ones."""
    return tuple(m for m in banned_modules if m not in DETERMINISM_MODULES)


ARGS_MARSHAL_VERSION = 2  # no back-references: the bytes are a function of the values (from 3 on, refcounts set flags)


def marshalled_args(args, max_chars: int) -> bytes:
    """The arguments as the child receives them: literal types only (checked by writing them
    as literal text, within `max_chars`), marshalled; subclasses (Counter, namedtuple) are
    sent in their literal form. Raises LiteralError or TypeError. Equal bytes mean the child
    gets the same values, bit for bit (a NaN's sign included): the result memory's key."""
    text = to_literal(tuple(args), max_chars=max_chars)
    try:
        return marshal.dumps(tuple(args), ARGS_MARSHAL_VERSION)
    except ValueError:
        return marshal.dumps(from_literal(text), ARGS_MARSHAL_VERSION)


class Precheck:
    """Everything decided in the parent before a call reaches a worker (cached per program):
    the static check, and compiling (compiling runs nothing; the child then only loads
    the code object, which saves it a third of its work)."""

    def __init__(self, config: ExecutorConfig):
        modules = runtime_modules(config.banned_modules)
        self.policy = SandboxRules.from_lists(modules, config.banned_calls)
        self.twice = SandboxRules.from_lists(tuple(m for m in config.banned_modules if m not in modules), ())
        self.max_output = config.max_output_bytes
        self._programs: dict[str, ExecResult | object] = {}  # source -> final verdict or code object
        self._twice: dict[str, ExecResult | None] = {}  # source -> its determinism ban, if any

    def __call__(self, call: ExecCall, twice: bool = False) -> tuple[ExecResult | None, bytes | None]:
        """(a final result, None) or (None, the request for a worker); `twice`: for the
        determinism check, where the determinism bans apply too (`determinism`)."""
        if not isinstance(call.entry, str) or not call.entry.isidentifier():
            return ExecResult("error", error=f"ValueError: bad entry point name {call.entry!r}"), None
        banned = self.determinism(call) if twice else None
        if banned is not None:
            return banned, None
        program = self._program(call.code)
        if isinstance(program, ExecResult):
            return program, None
        try:
            args = marshalled_args(call.args, max(self.max_output, 1 << 20))
        except (LiteralError, TypeError) as e:
            return ExecResult("error", error=f"ValueError: arguments are not literal values: {e}"), None
        return None, marshal.dumps((program, call.entry, args))

    def determinism(self, call: ExecCall) -> ExecResult | None:
        """ "banned" when the program imports a module banned for determinism's sake
        (`rules.DETERMINISM_MODULES`, where the configured list holds them), else None."""
        code = call.code
        if not isinstance(code, str) or not self.twice.modules:
            return None
        if code not in self._twice:
            try:
                reason = scan(ast.parse(code, USER_FILE), self.twice)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                reason = None  # the ordinary check says what is wrong with it
            if len(self._twice) > 20_000:
                self._twice.clear()
            self._twice[code] = ExecResult("banned", error=f"{reason} (for determinism)") if reason else None
        return self._twice[code]

    def _program(self, code: str):
        if isinstance(code, str) and code in self._programs:
            return self._programs[code]
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS:
            return ExecResult("error", error=f"ValueError: code must be a str of at most {MAX_CODE_CHARS} chars")
        try:
            tree = ast.parse(code, USER_FILE)
            reason = scan(tree, self.policy)
            program = ExecResult("banned", error=reason) if reason else compile(tree, USER_FILE, "exec", dont_inherit=True)
        except SyntaxError as e:
            program = ExecResult("error", error=f"SyntaxError: {e.msg} (line {e.lineno})")
        except (ValueError, RecursionError, MemoryError) as e:
            program = ExecResult("error", error=f"{type(e).__name__}: {e}")
        if len(self._programs) > 20_000:
            self._programs.clear()
        self._programs[code] = program
        return program
