"""Run-folder hygiene: a fresh run never mixes with, or deletes, an earlier one."""

from unified.runlog import set_aside_previous_run


def test_fresh_run_sets_an_earlier_run_aside(tmp_path):
    out = tmp_path / "mbpp"
    assert set_aside_previous_run(out) is None  # nothing there yet
    out.mkdir()
    assert set_aside_previous_run(out) is None  # an empty folder (e.g. --output-dir made by hand) stays
    (out / "main.log").write_text("round 1 ...\n")
    (out / "checkpoints").mkdir()
    moved = set_aside_previous_run(out)
    assert moved is not None and moved.name.startswith("mbpp.") and (moved / "main.log").read_text() == "round 1 ...\n"
    assert not out.exists()
    out.mkdir()
    (out / "main.log").write_text("second\n")
    again = set_aside_previous_run(out)
    assert again != moved and again.exists() and moved.exists()  # same second: a distinct name
