"""What generated code may not use, and the static check that finds it without running it.

The default lists follow the Absolute Zero Reasoner's spirit: no process control, no
concurrency, no network, no clocks or randomness (they make outputs nondeterministic),
no reflection that reaches interpreter internals, no writing files, no dynamic code.

Entry syntax (both lists are plain strings so a Hydra override can change them):
  banned_modules: "subprocess" bans the module and every submodule ("subprocess.x").
  banned_calls:   "os.system", "os.exec*" (fnmatch on the attribute) - module functions;
                  "eval", "exit" - builtins, matched as bare names ("eval" alone is left
                  to the run time: the guard evaluates constants and operators, as in
                  HumanEval/160's canonical answer, and refuses anything else);
                  "__globals__", "f_back" - attribute names (not builtins), matched as
                  names, attributes and string constants (getattr(x, "__globals__"));
                  "open:write" - open()/io.open() with a constant write/append mode and
                  Path.write_text/write_bytes.

Covered: imports (with aliases, `from m import *`), references to banned functions
(called or not), dunder/frame attributes used to escape, write-mode open with a constant
mode. Not covered (the runtime guards and the kernel catch these): names built at run
time (getattr(os, "sys" + "tem")), write modes that are not constants.
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
from dataclasses import dataclass

BANNED_MODULES = (
    # process control and concurrency
    "subprocess", "multiprocessing", "concurrent", "threading", "_thread", "asyncio", "pebble",
    "signal", "_signal", "pty", "tty", "termios", "fcntl", "resource", "mmap", "_posixsubprocess",
    # network
    "socket", "_socket", "ssl", "select", "selectors", "socketserver", "http", "urllib", "urllib3",
    "requests", "httpx", "aiohttp", "ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc",
    "webbrowser",
    # native code, interpreter internals, dynamic imports
    "ctypes", "_ctypes", "cffi", "importlib", "imp", "pkgutil", "runpy", "zipimport", "_imp",
    "_frozen_importlib", "_frozen_importlib_external", "builtins", "__builtin__", "gc", "inspect",
    "code", "codeop", "pdb", "bdb", "trace", "tracemalloc", "faulthandler", "atexit", "posix", "nt",
    "pickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "pwd", "grp", "getpass",
    # file system mutation
    "shutil", "tempfile",
    # nondeterminism: clocks, randomness, hashing, logging (AZR bans these for determinism)
    "random", "_random", "secrets", "uuid", "time", "datetime", "_datetime", "calendar",
    "zoneinfo", "hashlib", "_hashlib", "hmac", "bcrypt", "logging",
)  # fmt: skip  # table: one group of modules a line, under its comment

# The bans above that exist for self-play determinism (AZR's reason), not for safety: they apply
# where a program's outputs become a task's expected values, the determinism check's two runs
# (`Executor.run_twice`, phase 2), and nowhere else. A `solve` answer, an induction answer or an
# evaluated program that imports hashlib, datetime or random is judged by its values, as under
# EvalPlus's own harness (HumanEval/162's canonical answer imports hashlib).
DETERMINISM_MODULES = (
    "random",
    "_random",
    "secrets",
    "uuid",
    "time",
    "datetime",
    "_datetime",
    "calendar",
    "zoneinfo",
    "hashlib",
    "_hashlib",
    "hmac",
    "bcrypt",
    "logging",
)

BANNED_CALLS = (
    # process control
    "os.system", "os.popen", "os.fork", "os.forkpty", "os.exec*", "os.spawn*", "os.posix_spawn*",
    "os.kill", "os.killpg", "os.abort", "os._exit", "os.wait*", "os.setsid", "os.setpgid",
    "os.setpgrp", "os.set*uid", "os.set*gid", "os.setgroups", "os.nice", "os.register_at_fork",
    "os.pidfd_open", "os.sched_setaffinity", "os.setpriority",
    # file system mutation and raw descriptors
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames", "os.replace",
    "os.truncate", "os.ftruncate", "os.*chmod", "os.*chown", "os.chdir", "os.fchdir", "os.chroot",
    "os.link", "os.symlink", "os.mkfifo", "os.mknod", "os.open", "os.close", "os.closerange",
    "os.dup", "os.dup2", "os.write", "os.pipe", "os.pipe2", "os.memfd_create",
    # environment (secrets) and interpreter state
    "os.putenv", "os.unsetenv", "os.environ", "os.environb", "os.getenv", "os.getenvb",
    "sys.exit", "sys.modules", "sys._getframe", "sys.settrace", "sys.setprofile",
    "sys.set_int_max_str_digits", "sys.addaudithook", "sys.breakpointhook",
    # builtins
    "eval", "exec", "compile", "__import__", "globals", "breakpoint", "input", "exit", "quit",
    "help", "open:write",
    # attributes that reach interpreter internals
    "__builtins__", "__subclasses__", "__globals__", "__code__", "__closure__", "__loader__",
    "__spec__", "f_globals", "f_locals", "f_builtins", "f_back", "gi_frame", "cr_frame",
    "ag_frame", "tb_frame",
)  # fmt: skip  # table: one group of calls a line, under its comment

OPEN_WRITE = "open:write"
# Banned builtins the static check lets through: the runtime guard decides each call by its
# argument (`sandbox.guards`: eval of an expression of constants and operators only).
RUNTIME_CHECKED = frozenset({"eval"})
_WRITE_MODE_CHARS = set("wax+")
_OPENERS = {"open", "io.open", "codecs.open"}
_WRITERS = {"write_text", "write_bytes"}


def module_banned(name: str, banned_modules: tuple[str, ...]) -> bool:
    """Whether `name` is a banned module or inside one."""
    return any(name == b or name.startswith(b + ".") for b in banned_modules)


@dataclass(frozen=True)
class SandboxRules:
    """The two configured lists, split by kind for fast matching."""

    modules: tuple[str, ...]
    qualified: tuple[str, ...]  # "os.system", "os.exec*"
    builtin_names: frozenset[str]  # "eval"
    attribute_names: frozenset[str]  # "__globals__"
    open_write: bool

    @classmethod
    def from_lists(cls, banned_modules, banned_calls) -> SandboxRules:
        calls = [c for c in banned_calls if c != OPEN_WRITE]
        bare = [c for c in calls if "." not in c]
        return cls(
            modules=tuple(banned_modules),
            qualified=tuple(c for c in calls if "." in c),
            builtin_names=frozenset(c for c in bare if hasattr(builtins, c)),
            attribute_names=frozenset(c for c in bare if not hasattr(builtins, c)),
            open_write=OPEN_WRITE in banned_calls,
        )

    def call_banned(self, dotted: str) -> bool:
        return any(fnmatch.fnmatchcase(dotted, pattern) for pattern in self.qualified)

    def module_has_banned_calls(self, module: str) -> bool:
        return any(p.startswith(module + ".") for p in self.qualified)


def scan(tree: ast.AST, policy: SandboxRules) -> str | None:
    """The first banned use in a parsed module, as a message, or None if there is none."""
    checker = _Scanner(policy)
    checker.bind_names(tree)
    try:
        checker.visit(tree)
    except _Found as found:
        return str(found)
    return None


class _Found(Exception):
    pass


class _Scanner(ast.NodeVisitor):
    def __init__(self, policy: SandboxRules):
        self.policy = policy
        self.aliases: dict[str, str] = {}  # local name -> dotted module path
        self.bound: set[str] = set()  # names the program defines itself (shadow builtins)

    def bind_names(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)

    def found(self, node: ast.AST, what: str) -> None:
        raise _Found(f"{what} (line {getattr(node, 'lineno', '?')})")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_module(node, alias.name)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return  # relative import: the program is a lone module, it fails by itself
        self.check_module(node, node.module)
        for alias in node.names:
            if alias.name == "*":
                if self.policy.module_has_banned_calls(node.module):
                    self.found(node, f"banned: `from {node.module} import *`")
                continue
            dotted = f"{node.module}.{alias.name}"
            self.check_module(node, dotted)
            if self.policy.call_banned(dotted):
                self.found(node, f"banned call: {dotted}")
            self.aliases[alias.asname or alias.name] = dotted

    def check_module(self, node: ast.AST, name: str) -> None:
        if module_banned(name, self.policy.modules):
            self.found(node, f"banned import: {name}")

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.policy.attribute_names:
            self.found(node, f"banned name: {name}")
        if name in self.aliases:
            dotted = self.aliases[name]
            if self.policy.call_banned(dotted):
                self.found(node, f"banned call: {dotted}")
        elif name in self.policy.builtin_names and name not in self.bound and name not in RUNTIME_CHECKED:
            self.found(node, f"banned builtin: {name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.policy.attribute_names:
            self.found(node, f"banned attribute: {node.attr}")
        dotted = self.dotted(node)
        if dotted is not None:
            if module_banned(dotted, self.policy.modules):
                self.found(node, f"banned module: {dotted}")
            if self.policy.call_banned(dotted):
                self.found(node, f"banned call: {dotted}")
        if self.policy.open_write and node.attr in _WRITERS:
            self.found(node, f"banned: writing files ({node.attr})")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value in self.policy.attribute_names:
            self.found(node, f"banned name in a string: {node.value}")

    def visit_Call(self, node: ast.Call) -> None:
        if self.policy.open_write and self.is_open(node.func):
            mode = node.args[1] if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == "mode":
                    mode = kw.value
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
                if _WRITE_MODE_CHARS & set(mode.value):
                    self.found(node, f"banned: open() for writing (mode {mode.value!r})")
        self.generic_visit(node)

    def is_open(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Name):
            if func.id in self.aliases:
                return self.aliases[func.id] in _OPENERS
            return func.id == "open" and "open" not in self.bound
        dotted = self.dotted(func)
        return dotted in _OPENERS

    def dotted(self, node: ast.AST) -> str | None:
        """`a.b.c` with the import alias of `a` resolved, or None if not a plain chain."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id)
        if base is None:
            return None  # a local variable's attribute, not a module's
        return ".".join([base, *reversed(parts)])
