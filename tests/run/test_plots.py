"""unified.run.plots.plot_run: one PNG from a per-round metrics JSONL, tolerant of gaps."""

import json
import struct

from unified.run.plots import plot_run, read_metrics, series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _full_round(r):
    return {
        "round": r,
        "reward/induction": 0.1 * r,
        "reward/deduction": 0.2,
        "reward/abduction": 0.05 * r,
        "eval/pass@1": 0.25 if r % 2 else None,
        "time/phase_1_4": 30.0 + r,
        "time/phase_5": 60.0,
        "time/push": 0.03,
        "loss": 0.5,
    }


def test_full_run_writes_one_png(tmp_path):
    src = _write(tmp_path / "metrics.jsonl", [_full_round(r) for r in range(1, 6)])
    out = plot_run(src, tmp_path / "plots" / "run.png")
    assert out == tmp_path / "plots" / "run.png"
    width, height = _png_size(out)
    assert width >= 400 and height >= 400
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["run.png"]  # no temp file left behind


def test_missing_keys_nulls_and_junk_lines_are_tolerated(tmp_path):
    rows = [
        {"round": 1, "reward/induction": 0.1},
        "not json at all",
        "",
        {"round": 2, "eval/pass@1": None, "time/push": 0.02},
        {"round": 3, "reward/deduction": "n/a", "time/phase_5": 12.5},
        [1, 2, 3],
    ]
    src = _write(tmp_path / "metrics.jsonl", rows)
    parsed = read_metrics(src)
    assert [r["round"] for r in parsed] == [1, 2, 3]
    assert series(parsed, "reward/induction") == ([1], [0.1])
    assert series(parsed, "reward/deduction") == ([], [])  # a string is not a number
    assert series(parsed, "eval/pass@1") == ([], [])
    _png_size(plot_run(src, tmp_path / "gaps.png"))


def test_single_round_and_empty_file(tmp_path):
    one = _write(tmp_path / "one.jsonl", [_full_round(1)])
    _png_size(plot_run(one, tmp_path / "one.png"))
    empty = _write(tmp_path / "empty.jsonl", [])
    _png_size(plot_run(empty, tmp_path / "empty.png"))


def test_nan_values_and_missing_round_numbers(tmp_path):
    src = tmp_path / "m.jsonl"
    src.write_text('{"reward/induction": NaN, "time/push": 0.01}\n{"reward/induction": 0.5}\n')
    rows = read_metrics(src)
    assert [r["round"] for r in rows] == [1, 2]
    assert series(rows, "reward/induction") == ([2], [0.5])
    _png_size(plot_run(src, tmp_path / "m.png"))


def test_equal_reward_curves_stay_distinguishable(tmp_path):
    """All three rewards at the format penalty: each curve keeps its own marker, size and dash."""
    from unified.run.plots import REWARD_KEYS, REWARD_STYLE

    styles = [REWARD_STYLE[k] for k in REWARD_KEYS]
    for field in ("marker", "markersize", "linestyle"):
        assert len({s[field] for s in styles}) == 3, field
    rows = [{"round": r, **{k: -0.5 for k in REWARD_KEYS}} for r in (1, 2)]
    _png_size(plot_run(_write(tmp_path / "flat.jsonl", rows), tmp_path / "flat.png"))


def test_hparams_and_summary_image_reach_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from unified.run.runlog import RunLog

    png = plot_run(_write(tmp_path / "metrics.jsonl", [_full_round(1), _full_round(2)]), tmp_path / "summary.png")
    runlog = RunLog(tmp_path / "run")
    runlog.open_tensorboard()
    runlog.hparams({"algorithm.lr": 1e-5, "model.path": "smollm2", "trainer.rounds": 2}, metrics=("eval/pass@1",))
    runlog.scalars(1, {"eval/pass@1": 0.25})
    runlog.image("summary", png, 2)
    runlog.close()
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"images": 0}).Reload()
    assert "summary" in events.Tags()["images"]
    assert "_hparams_/session_start_info" in events.PluginTagToContent("hparams")
    assert len(list((tmp_path / "run" / "tensorboard").iterdir())) == 1  # one run folder: the HParams tab sees its scalars


def test_the_pass_panel_shows_the_final_evaluation_and_times_start_at_zero():
    """A run that evaluated only at the end still has a pass@1 point (after its last round);
    the time axes start at zero, so noise between rounds does not read as a trend."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from unified.run.plots import _pass_panel, _times_panel

    rows = [{"round": r, "time/phase_1_4": 13.0 + r / 10, "time/phase_5": 14.0, "time/push": 0.14} for r in (1, 2)]
    fig, (ax_p, ax_t) = plt.subplots(2, 1)
    try:
        _pass_panel(ax_p, rows, final=0.25)
        [line] = ax_p.get_lines()
        assert list(line.get_xdata()) == [3] and list(line.get_ydata()) == [0.25] and not ax_p.texts
        _times_panel(ax_t, rows)
        assert ax_t.get_ylim()[0] == 0
    finally:
        plt.close(fig)
