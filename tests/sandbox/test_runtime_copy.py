"""The pool's runtime copy (`sandbox.runtime`): what it holds, that calls run on it, and that
a copy left by a dead process is cleaned up."""

import os
import subprocess
import sys

import pytest

from unified.sandbox import runtime
from unified.sandbox.executor import Executor, ExecutorConfig

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the runtime copy is made as root")


def test_the_manifest_holds_the_interpreter_its_libraries_and_no_test_suite():
    files = runtime.manifest()
    stdlib = os.path.dirname(os.__file__)
    assert sys._base_executable in files and os.path.realpath(sys._base_executable) in files
    assert os.path.join(stdlib, "json", "__init__.py") in files
    assert any(os.path.basename(f).startswith("libc.so") for f in files)  # what the loader needs inside
    assert any("ld-linux" in f or os.path.basename(f).startswith("ld-") for f in files), "no dynamic loader"
    assert not any(f.startswith(os.path.join(stdlib, d) + os.sep) for f in files for d in ("test", "site-packages", "idlelib"))


@needs_root
def test_calls_run_on_the_copy_with_the_whole_stdlib_they_may_use():
    with Executor(ExecutorConfig(workers=1)) as ex:
        assert ex.isolation["runtime_copy"] is True
        code = (
            "import os, json, decimal, fractions, re, collections, heapq, bisect, math, string\n"
            "def f():\n"
            "    here = os.path.dirname(os.__file__)\n"
            "    return (os.path.isdir(os.path.join(here, 'test')), os.listdir(os.path.join(here, 'site-packages')),\n"
            "            str(decimal.Decimal(1) / 4), json.loads('[1]'))\n"
        )
        r = ex.run(code, "f")
    assert r.ok and r.value == (False, [], "0.25", [1]), r  # the host's stdlib has a test/ directory: not this one


@needs_root
def test_a_copy_left_by_a_dead_process_is_removed():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = runtime.SHM / f"{runtime.PREFIX}{int(dead.stdout)}"
    (stale / "lib").mkdir(parents=True)
    os.chmod(stale / "lib", 0o555)  # sealed, as a real copy is
    runtime._remove_stale()
    assert not stale.exists()
    assert runtime.runtime_dir() is not None and runtime.runtime_dir().exists()  # this process's own stays


@needs_root
def test_a_forked_child_that_exits_leaves_its_parents_copy():
    import os as _os

    mine = runtime.runtime_dir()
    pid = _os.fork()
    if pid == 0:  # the child runs the exit handlers it inherited, as a forked worker that exits normally does
        import atexit

        atexit._run_exitfuncs()
        _os._exit(0)
    _os.waitpid(pid, 0)
    assert mine.is_dir(), "a forked child's exit removed its parent's runtime copy"


@needs_root
def test_a_removed_copy_is_made_again_and_a_pool_never_fails_for_it():
    runtime._rmtree(runtime.runtime_dir())
    with Executor(ExecutorConfig(workers=1)) as ex:
        assert ex.isolation["runtime_copy"] is True and ex.run("def f():\n    return 1", "f").value == 1


def test_the_manifest_ignores_the_callers_loader_variables(monkeypatch, tmp_path):
    # a process that loaded vLLM carries LD_PRELOAD / LD_LIBRARY_PATH into site-packages; the
    # worker's loader sees neither, so the copy must hold what a clean loader resolves
    libs = tmp_path / "lib"
    libs.mkdir()
    libc = next(f for f in runtime.manifest() if os.path.basename(f).startswith("libc.so"))
    (libs / os.path.basename(libc)).write_bytes(open(os.path.realpath(libc), "rb").read())
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libs))
    monkeypatch.setenv("LD_PRELOAD", str(libs / os.path.basename(libc)))
    files = runtime.manifest()
    assert not any(f.startswith(str(tmp_path)) for f in files), [f for f in files if f.startswith(str(tmp_path))][:3]
    assert not any(f.startswith("/tmp/") for f in files)


@needs_root
def test_the_copy_is_a_read_only_tmpfs_of_its_own_whose_counters_show_nothing_of_the_host():
    copy = runtime.runtime_dir()
    assert os.path.ismount(copy) and os.stat(copy).st_dev != os.stat(runtime.SHM).st_dev  # not /dev/shm's file system
    own = os.statvfs(copy)
    assert own.f_flag & os.ST_RDONLY and own.f_blocks != os.statvfs(runtime.SHM).f_blocks  # sealed: its counters never move
    code = "import os\ndef f():\n    try:\n        s = os.statvfs(os.__file__)\n        return s.f_blocks, s.f_bfree\n    except OSError as e:\n        return e.errno\n"
    with Executor(ExecutorConfig(workers=1, banned_modules=(), banned_calls=())) as ex:
        r = ex.run(code, "f")
    assert r.ok and r.value in (1, (own.f_blocks, own.f_bfree)), r  # EPERM (the allowlist), or the copy's own numbers


def test_a_pool_without_its_own_runtime_refuses_to_start_unless_allowed(monkeypatch, caplog):
    import logging

    from unified.sandbox import executor as executor_module
    from unified.sandbox import notice

    monkeypatch.setattr(executor_module, "runtime_dir", lambda: None)
    monkeypatch.setattr(executor_module, "why_none", lambda: "not root")
    with pytest.raises(notice.SharedRuntimeError) as refused:
        Executor(ExecutorConfig(workers=1, allow_shared_runtime=False))
    line = str(refused.value)
    assert isinstance(refused.value, ValueError)  # the trainer turns it into one line (components: UserError)
    assert "\n" not in line and "not root" in line and "executor.allow_shared_runtime=true" in line, line
    monkeypatch.setattr(notice, "_said", set())
    with caplog.at_level(logging.WARNING, logger="unified"):
        with Executor(ExecutorConfig(workers=1, allow_shared_runtime=True)) as ex:
            assert ex.run("def f():\n    return 1", "f").value == 1
    said = [r.getMessage() for r in caplog.records]
    assert any("not root" in m and "open:" in m and "page cache" in m for m in said) or os.geteuid() != 0, said


def test_the_trainer_config_refuses_a_shared_runtime_and_a_bare_executor_allows_it():
    from unified.config import load_config

    assert ExecutorConfig().allow_shared_runtime  # tests, `unified.eval`: the start-up line says what is open
    _, cfg = load_config(["model=tiny"])
    assert cfg.executor.allow_shared_runtime is False
    _, cfg = load_config(["model=tiny", "executor.allow_shared_runtime=true"])
    assert cfg.executor.allow_shared_runtime is True
