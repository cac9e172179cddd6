"""Run-folder convention: a run without --resume never writes over, moves or deletes an
earlier run, and a run that fails before its first checkpoint leaves the folder as it was."""

import os

import pytest

from unified.config import UserError, load_config
from unified.run.runlog import FolderGuard, check_run_folder


def _snapshot(folder):
    """Every file's bytes and mtime, every folder: what 'exactly as it was' means."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.stat()
        out[str(p.relative_to(folder))] = (p.read_bytes(), st.st_mtime_ns) if p.is_file() else "dir"
    return out


def _finished_run(out):
    (out / "checkpoints" / "round_000003" / "model").mkdir(parents=True)
    (out / "checkpoints" / "round_000003" / "state.pt").write_bytes(b"state")
    (out / "checkpoints" / "latest").write_text("round_000003\n")
    (out / "main.log").write_text("round 1\nround 2\nround 3\n")
    (out / "metrics.jsonl").write_text('{"round": 1}\n{"round": 2}\n{"round": 3}\n')
    (out / "round_3").mkdir()
    (out / "round_3" / "phase_5.log").write_text("phase 5 of round 3\n")
    (out / "tensorboard").mkdir()
    (out / "tensorboard" / "events.1").write_bytes(b"tb")
    return out


def test_a_folder_with_checkpoints_is_refused_with_the_way_to_continue(tmp_path):
    out = _finished_run(tmp_path / "x")
    before = _snapshot(out)
    with pytest.raises(UserError) as err:
        check_run_folder(out, "none")
    assert "--resume auto" in str(err.value) and "--output-dir" in str(err.value) and "round_000003" in str(err.value)
    check_run_folder(out, "auto")  # continuing is allowed
    assert _snapshot(out) == before


def test_logs_without_a_checkpoint_are_refused_too(tmp_path):
    out = tmp_path / "x"
    out.mkdir()
    check_run_folder(out, "none")  # an empty folder (made by hand) is fine
    (out / "main.log").write_text("a run that died early\n")
    with pytest.raises(UserError, match="--output-dir"):
        check_run_folder(out, "none")


def test_failed_run_into_a_new_folder_leaves_nothing(tmp_path):
    out = tmp_path / "new"
    guard = FolderGuard(out)
    (out / "tensorboard").mkdir(parents=True)
    (out / "main.log").write_text("started\n")
    assert guard.restore() and not out.exists()


def test_failed_resumed_run_leaves_the_folder_exactly_as_it_was(tmp_path):
    out = _finished_run(tmp_path / "x")
    os.utime(out / "main.log", ns=(10**18, 10**18))
    before = _snapshot(out)
    guard = FolderGuard(out)
    with open(out / "main.log", "a") as f:  # what a failing start-up does
        f.write("starting again\n")
    (out / "metrics.jsonl").write_text('{"round": 1}\n')  # truncated on resume
    with open(out / "round_3" / "phase_5.log", "a") as f:
        f.write("more\n")
    (out / "tensorboard" / "events.2").write_bytes(b"new")
    (out / "round_4").mkdir()
    (out / "round_4" / "programs.parquet").write_bytes(b"x")
    assert guard.restore()
    assert _snapshot(out) == before


def test_a_run_that_checkpointed_keeps_its_progress(tmp_path):
    out = _finished_run(tmp_path / "x")
    guard = FolderGuard(out)
    (out / "checkpoints" / "round_000004").mkdir()
    (out / "checkpoints" / "round_000004" / "state.pt").write_bytes(b"new state")
    assert not guard.restore()
    assert (out / "checkpoints" / "round_000004" / "state.pt").exists()


def test_train_that_fails_at_start_up_restores_the_folder(tmp_path, monkeypatch):
    """The failing-run case end to end: train() past its checks, a failure while building
    (after main.log and the folder were written), the folder exactly as before."""
    import unified.run.loop as loop

    out = tmp_path / "run"
    out.mkdir()
    (out / "main.log").write_text("an earlier, killed run\n")
    (out / "metrics.jsonl").write_text('{"round": 1}\n')
    before = _snapshot(out)

    def failing_build(cfg, inputs):
        (out / "round_1").mkdir()
        (out / "round_1" / "phase_1_4.log").write_text("half a round\n")
        raise RuntimeError("engine failed to start")

    monkeypatch.setattr(loop, "build_components", failing_build)
    _, cfg = load_config(["model=tiny", f"output_dir={out}", "trainer.resume=auto", "benchmark.problems=1"])
    with pytest.raises(RuntimeError, match="engine failed"):
        loop.train(cfg)
    assert _snapshot(out) == before

    fresh = tmp_path / "fresh"
    _, cfg = load_config(["model=tiny", f"output_dir={fresh}", "benchmark.problems=1"])
    with pytest.raises(RuntimeError):
        loop.train(cfg)
    assert not fresh.exists()


def test_a_second_process_on_the_same_folder_is_refused(tmp_path, monkeypatch):
    """Two runs in one folder (e.g. `--resume auto` started twice) would interleave their
    checkpoints and logs: the second stops with one line and touches nothing."""
    import unified.run.loop as loop
    from unified.run.runlog import RunLock

    out = _finished_run(tmp_path / "x")
    held = RunLock(out)  # the first run
    before = _snapshot(out)
    built = []
    monkeypatch.setattr(loop, "build_components", lambda cfg, inputs: built.append(1) or 1 / 0)
    _, cfg = load_config(["model=tiny", f"output_dir={out}", "trainer.resume=auto", "benchmark.problems=1"])
    with pytest.raises(UserError, match=rf"is in use by another run \(pid {os.getpid()}\).*--output-dir"):
        loop.train(cfg)
    assert _snapshot(out) == before and not built
    held.release()
    with pytest.raises(ZeroDivisionError):  # the folder is free again: the next run gets past the lock
        loop.train(cfg)
    assert built == [1] and _snapshot(out) == before
