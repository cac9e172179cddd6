"""Python-level guards of the sandbox (best effort; the kernel jail is the real boundary).

This source is executed by the worker (`sandbox.worker`) into a namespace of its own: it
is not a module, imports nothing of the project, and holds nothing that decides a
result (the reply writer lives in another namespace, and the parent compares values).

Installed once in the worker, inherited by every forked call (`install`):
- banned module functions (os.system, os.kill, ...) become stubs raising `BannedCall`;
- os.getppid answers 1 where the kernel answers 0 (the call's parent is outside its namespace);
  the list arrives already expanded from the configured patterns;
- eval/exec/compile/... raise when the program calls them directly (namedtuple,
  dataclasses and enum use them internally); eval of an expression made of constants and
  operators alone (no name, attribute, call, subscript or comprehension: it reaches no
  object) is evaluated, as a plain interpreter would (HumanEval/160's canonical answer);
- `open` for writing is refused outside the call's directory (always, with "open:write");
- a guarded `__import__` refuses banned modules to the program's own code.
Armed once in the worker too, after its own imports and just before its first fork, so
that every call's child starts armed (`arm`):
- banned modules and the project's (`unified`) are dropped from `sys.modules`, and
  `__main__` becomes the program's own module;
- an audit hook, which no Python code can remove, refuses the program's imports of
  banned modules, everyone's imports of `unified`, and, when `gc` is banned, the gc introspection that reaches every
  object (`gc.get_objects`, `get_referrers`, `get_referents`) and trace/profile hooks.
"""

import _ast
import builtins
import io
import os
import sys

USER_FILE = "<sandbox>"  # co_filename of the program: how guards recognise its frames
ALWAYS_BANNED = ("unified",)  # the project itself, whatever the policy
_GC_EVENTS = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "sys._current_frames",
        "sys._current_exceptions",
    }
)
# Banned for programs, but the interpreter's own: dropping them breaks `from builtins import open`.
_INTERPRETER_MODULES = frozenset(
    {"builtins", "posix", "_imp", "_thread", "_signal", "marshal", "_io", "_frozen_importlib", "_frozen_importlib_external"}
)
_getframe, _addaudithook, _realpath = sys._getframe, sys.addaudithook, os.path.realpath  # before any stub
_real_open, _real_import, _getppid = builtins.open, builtins.__import__, os.getppid
_compile = compile
MAX_EVAL_CHARS = 100_000
# What an expression handed to eval may hold: constants, the containers made of them and
# operators (the node classes of `_ast`; operators and contexts by their base classes).
_EVAL_NODES = (
    _ast.Expression, _ast.Constant, _ast.BinOp, _ast.UnaryOp, _ast.BoolOp, _ast.Compare, _ast.IfExp,
    _ast.Tuple, _ast.List, _ast.Set, _ast.Dict,
    _ast.operator, _ast.unaryop, _ast.boolop, _ast.cmpop, _ast.expr_context,
)  # fmt: skip  # table: the nodes, then the operator families


class BannedCall(PermissionError):
    """A banned function was called at run time. An OSError (EPERM), as the kernel refuses what
    the allowlist leaves out: the standard library's own fallbacks for a refused call then
    work (platform.architecture() answered '64bit' without a pipe, and raised on the stub)."""

    def __init__(self, message: str):
        super().__init__(1, message)

    def __str__(self) -> str:
        return self.strerror


class BannedImport(ImportError):
    """A banned module was imported at run time."""


def module_banned(name, banned):
    return any(name == b or name.startswith(b + ".") for b in banned)


def install(banned_modules, stubs, direct, open_write, sandbox_dir) -> None:
    """Stubs, open, __import__ and the meta-path finder, on this (the worker) process."""
    banned = tuple(banned_modules) + ALWAYS_BANNED
    for module_name, attr in stubs:
        module = sys.modules.get(module_name)
        if module is not None and callable(getattr(module, attr, None)):
            name = f"{'os' if module_name == 'posix' else module_name}.{attr}"
            real = getattr(module, attr)
            setattr(module, attr, _direct_call_stub(name, real) if name in direct else _stub(name))
    for name in direct:
        if "." not in name and hasattr(builtins, name):
            real = getattr(builtins, name)
            setattr(builtins, name, _constant_eval(real) if name == "eval" else _direct_call_stub(name, real))
    for module in (os, sys.modules.get("posix")):
        module.getppid = _parent
    guarded_open = _guarded_open(open_write, sandbox_dir.rstrip("/") + "/")
    builtins.open = io.open = guarded_open
    builtins.__import__ = _guarded_import(banned)


def arm(hook, prune, user_module) -> None:
    """In the zygote, once, when it has imported all it needs (see module doc): every
    call's child inherits this. `hook` and `prune` (the loaded modules to drop) are made
    by the worker; it keeps its own references to the modules it uses."""
    modules = sys.modules
    for name in prune:
        modules.pop(name, None)
    modules["__main__"] = user_module
    _addaudithook(hook)


def loaded_banned(banned_modules) -> tuple:
    banned = tuple(banned_modules) + ALWAYS_BANNED
    return tuple(n for n in sys.modules if module_banned(n, banned) and n not in _INTERPRETER_MODULES)


def audit_hook(banned_modules, block_gc):
    # Everything the hook reads is in its closure: the hook object itself is reachable
    # from nowhere in Python, so neither it nor its lists can be changed. Imports are
    # refused when the program's own code asks for them: standard modules may use banned
    # ones internally (dataclasses imports inspect). The project is refused to everyone.
    prefixes = tuple(b + "." for b in banned_modules)
    names = frozenset(banned_modules)
    blocked = _GC_EVENTS if block_gc else frozenset()
    getframe, user_file = _getframe, USER_FILE

    def hook(event, args):
        if event == "import":
            name = args[0]
            if not isinstance(name, str):
                return
            if name == "unified" or name.startswith("unified."):
                raise BannedImport(f"import of {name!r} is banned")
            if (name in names or name.startswith(prefixes)) and getframe(1).f_code.co_filename == user_file:
                raise BannedImport(f"import of {name!r} is banned")
        elif event in blocked:
            raise BannedCall(f"{event}() is banned in the sandbox")

    return hook


def _parent() -> int:
    """os.getppid(): a call is PID 1 of a PID namespace of its own, so the kernel answers 0 (its
    parent is outside); a process on any other machine has a parent, shown as init."""
    return _getppid() or 1


def _stub(qualified: str):
    def banned(*args, **kwargs):
        raise BannedCall(f"{qualified}() is banned in the sandbox")

    return banned


def _direct_call_stub(name: str, real):
    def guarded(*args, **kwargs):
        if _getframe(1).f_code.co_filename == USER_FILE:
            raise BannedCall(f"{name}() is banned in the sandbox")
        return real(*args, **kwargs)

    return guarded


def _constant_eval(real):
    def eval(source, globals=None, locals=None):  # noqa: A001 - replaces the builtin
        if _getframe(1).f_code.co_filename != USER_FILE:
            return real(source, globals, locals)
        if not _constant_expression(source):
            raise BannedCall("eval() is banned in the sandbox beyond constants and operators")
        return real(source, {"__builtins__": {}}, {})

    return eval


def _constant_expression(source) -> bool:
    """Whether `source` (text) parses as one expression of constants and operators only."""
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError:
            return False
    if not isinstance(source, str) or len(source) > MAX_EVAL_CHARS:
        return False
    try:
        tree = _compile(source.strip(), "<eval>", "eval", _ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    nodes = [tree]
    while nodes:
        node = nodes.pop()
        if not isinstance(node, _EVAL_NODES):
            return False
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                nodes.extend(v for v in value if v is not None)  # a Dict's None key is **x: refused below
                if any(v is None for v in value) and isinstance(node, _ast.Dict):
                    return False
            elif isinstance(value, _ast.AST):
                nodes.append(value)
    return True


def _guarded_import(banned):
    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if level == 0 and module_banned(name, banned) and _getframe(1).f_code.co_filename == USER_FILE:
            raise BannedImport(f"import of {name!r} is banned")
        return _real_import(name, globals, locals, fromlist, level)

    return guarded_import


def _guarded_open(refuse_writes: bool, sandbox_dir: str):
    def open(file, mode="r", *args, **kwargs):  # noqa: A001 - replaces the builtin
        if isinstance(mode, str) and set(mode) & set("wax+"):
            if refuse_writes:
                raise BannedCall("open() for writing is banned in the sandbox")
            path = _realpath(file) if isinstance(file, (str, bytes, os.PathLike)) else None
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if path is None or not (path + "/").startswith(sandbox_dir):
                raise PermissionError(f"writing outside the sandbox directory: {file!r}")
        return _real_open(file, mode, *args, **kwargs)

    return open


class Capture:
    """stdout and stderr of the program, interleaved, keeping the first `limit` characters.
    A plain object with the file methods print() and programs use (an io class costs every
    call a dozen page copies more)."""

    encoding, errors, closed = "utf-8", "strict", False

    def __init__(self, limit: int):
        self.parts = []
        self.room = limit

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if self.room > 0:
            piece = s[: self.room]
            self.parts.append(piece)
            self.room -= len(piece)
        return len(s)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("the sandbox's stdout has no file descriptor")

    def getvalue(self) -> str:
        return "".join(self.parts)
