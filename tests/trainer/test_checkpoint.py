"""Checkpoint folders: atomic, pruned, validated, with fallback past a corrupted one."""

import logging
import random

import torch

from unified.trainer.checkpoint import find_resume, list_checkpoints, load_checkpoint, save_checkpoint, set_rng_state


def _save(root, r, keep=3):
    def write_model(path):
        path.mkdir()
        torch.save({"w": torch.full((4,), float(r))}, path / "weights.pt")

    return save_checkpoint(
        root,
        r,
        write_model=write_model,
        optimizer_state={"step": r},
        state={"version": 10 * r},
        config_yaml=f"round: {r}\n",
        keep=keep,
    )


def test_save_resume_and_prune(tmp_path):
    for r in (1, 2, 3, 4):
        _save(tmp_path, r, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["round_000003", "round_000004"]
    assert (tmp_path / "latest").read_text().strip() == "round_000004"
    folder = find_resume(tmp_path, "auto")
    state, opt = load_checkpoint(folder)
    assert state["round"] == 4 and state["version"] == 40 and opt == {"step": 4}
    assert find_resume(tmp_path, "none") is None
    assert find_resume(tmp_path, str(tmp_path / "round_000003")).name == "round_000003"


def test_corrupted_latest_falls_back_with_a_warning(tmp_path, caplog):
    _save(tmp_path, 1)
    latest = _save(tmp_path, 2)
    (latest / "model" / "weights.pt").write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="unified"):
        folder = find_resume(tmp_path, "auto")
    assert folder.name == "round_000001"
    assert any("corrupted" in r.message for r in caplog.records)


def test_a_killed_save_leaves_the_previous_checkpoint(tmp_path):
    _save(tmp_path, 1)
    (tmp_path / ".tmp-round_000002-999").mkdir()  # what a kill -9 mid-save leaves
    (tmp_path / ".tmp-round_000002-999" / "state.pt").write_bytes(b"half")
    assert find_resume(tmp_path, "auto").name == "round_000001"
    _save(tmp_path, 2)
    assert not list(tmp_path.glob(".tmp-*"))


def test_rng_states_round_trip(tmp_path):
    random.seed(3)
    torch.manual_seed(3)
    folder = _save(tmp_path, 1)
    expected = (random.random(), torch.rand(3))
    state, _ = load_checkpoint(folder)
    set_rng_state(state["rng"])
    assert random.random() == expected[0]
    assert torch.equal(torch.rand(3), expected[1])
