"""unified/eval/experiments/results_table.py: the results README's table is recomputed from the JSONs' per-problem
outcomes, refuses a JSON that contradicts itself, and the committed table matches the data."""

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
from unified.eval.experiments import results_table as rt


def _result(control: list[int], afters: list[list[int]], **stated) -> dict:
    ids = [f"P/{k}" for k in range(len(control))]
    body = {
        "benchmark": "mbpp",
        "rounds": 3,
        "per_problem_before": dict(zip(ids, map(float, control))),
        "seeds": [{"seed": s, "per_problem_after": dict(zip(ids, map(float, a)))} for s, a in enumerate(afters)],
        "settings": {
            "train_config": {"pipeline": {"kinds": ["solve"], "mix": ["solve:0.7", "induction:0.3"], "solve_source": "agreement"}}
        },
        "ci95": [0.01, 0.2],
    }
    gains = [sum(a) / len(a) - sum(control) / len(control) for a in afters]
    ups = sum(sum(1 for c, x in zip(control, a) if x and not c) for a in afters)
    downs = sum(sum(1 for c, x in zip(control, a) if c and not x) for a in afters)
    return {**body, "gain_per_seed": gains, "flips_gained": ups, "flips_lost": downs, **stated}


def test_a_row_is_recomputed_from_the_outcomes():
    control = [0] * 8 + [1, 1]
    seed0 = [1] * 7 + [0, 1, 1]  # +7 / -0
    seed1 = [1, 1, 0, 0, 0, 0, 0, 0, 1, 0]  # +2 / -1
    row = rt.gain_row("r.json", _result(control, [seed0, seed1]))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "mbpp 10" and cells[2] == "solve 0.7 + induction 0.3, agreement labels"
    assert cells[4] == "0.200" and cells[5] == "0.900, 0.300"
    assert cells[6] == "+7 / -0, +2 / -1"
    assert cells[7] == "0.016, 1"  # exact McNemar: 2 * 0.5**7; 3 discordant pairs split 2-1
    assert cells[8] == "[+0.010, +0.200]"


@pytest.mark.parametrize(
    ("pipeline", "algorithm", "recipe"),
    [
        (
            {"discovery_n": 32, "discovery_rounds": 1},
            {"sft_coef": 1.0, "consolidate_passes": 8},
            "solve, discovery 32 in round 1 + supervised term 1 + consolidation (8 passes)",
        ),
        (
            {"discovery_n": 32, "discovery_rounds": 2, "replay": True},
            {"consolidate_passes": 0},
            "solve, discovery 32 in rounds 1-2 + replay",
        ),
        ({"discovery_n": 32, "discovery_rounds": 0}, {}, "solve, discovery 32"),  # 0: every round
        ({"discovery_n": 0, "discovery_rounds": 1}, {}, "solve"),  # no budget: nothing to say of its rounds
    ],
)
def test_the_recipe_names_the_search_rounds_and_consolidation(pipeline, algorithm, recipe):
    body = {"settings": {"train_config": {"pipeline": {"kinds": ["solve"], **pipeline}, "algorithm": algorithm}}}
    assert rt._recipe(body) == recipe


def test_noisy_problems_are_left_out_like_the_bench_does():
    body = _result([0, 0, 0, 0], [[1, 1, 0, 0]])
    body["noisy_problems"] = ["P/0"]
    body["gain_per_seed"], body["flips_gained"] = [1 / 3], 1
    cells = [c.strip() for c in rt.gain_row("r.json", body).strip("|").split("|")]
    assert cells[1] == "mbpp 3" and cells[6] == "+1 / -0"


@pytest.mark.parametrize("stated", [{"gain_per_seed": [0.5]}, {"flips_gained": 9}, {"flips_lost": 1}])
def test_a_result_that_contradicts_its_own_outcomes_is_refused(stated):
    with pytest.raises(rt.Inconsistent, match="r.json"):
        rt.gain_row("r.json", _result([0, 0, 1, 0], [[1, 0, 1, 0]], **stated))


def test_the_check_names_a_stale_or_missing_block(tmp_path):
    (tmp_path / "test_time_gain_x.json").write_text(json.dumps(_result([0, 0, 1, 0], [[1, 0, 1, 0]])))
    text = rt.table(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# R\n\n{rt.BEGIN}\n{text}\n{rt.END}\n")
    assert rt.check(readme, text) == ""
    readme.write_text(f"# R\n\n{rt.BEGIN}\n{text.replace('+1 / -0', '+2 / -0')}\n{rt.END}\n")
    assert "out of date" in rt.check(readme, text)
    readme.write_text("# R\n")
    assert "no <!-- results-table -->" in rt.check(readme, text)


def test_the_committed_table_is_the_committed_results():
    """docs/results/README.md's table, and the front page's headline rows, are what the JSONs
    give: edit a JSON (or a table) alone and this fails."""
    folder = REPO / "docs" / "results"
    assert rt.check(folder / "README.md", rt.table(folder)) == ""
    assert rt.check(REPO / "README.md", rt.headline(folder), rt.HEADLINE_BEGIN, rt.HEADLINE_END) == ""
    for readme in (folder / "README.md", REPO / "README.md"):  # every other generated block a page has
        text = readme.read_text()
        for begin, end, make in rt.BLOCKS:
            if begin in text:
                assert rt.check(readme, make(folder), begin, end) == "", (readme, begin)


def test_the_goals_block_is_read_off_the_headline_result(tmp_path):
    from tests.eval.experiments.test_goals import MET

    (tmp_path / "test_time_gain.json").write_text(json.dumps(MET))
    readme = tmp_path / "README.md"
    readme.write_text(f"# R\n\n{rt.GOALS_BEGIN}\n{rt.GOALS_END}\n")
    assert rt.write(readme, tmp_path) == 1
    assert "13 of 13 met" in readme.read_text()
    assert rt.check(readme, rt.goals_table(tmp_path), rt.GOALS_BEGIN, rt.GOALS_END) == ""
    (tmp_path / "test_time_gain.json").write_text(json.dumps({**MET, "gain": 0.1}))  # the result changed, the page not
    assert "out of date" in rt.check(readme, rt.goals_table(tmp_path), rt.GOALS_BEGIN, rt.GOALS_END)
    assert "| gain | >= +0.13 | 0.1 | **no** |" in rt.goals_table(tmp_path)


def test_the_headline_states_the_planned_interval_where_the_result_has_it(tmp_path, monkeypatch):
    body = _result([0, 0, 1, 0], [[1, 0, 1, 0]])
    (tmp_path / "a.json").write_text(json.dumps(body))
    (tmp_path / "b.json").write_text(json.dumps({**body, "ci95_problems_seeds": [-0.123, 0.456]}))
    monkeypatch.setattr(rt, "HEADLINE", (("a", "a.json"), ("b", "b.json")))
    rows = rt.headline(tmp_path).splitlines()[2:]
    assert "[-0.123, +0.456]" in rows[1] and "[-0.123, +0.456]" not in rows[0]


def test_write_fills_the_blocks_and_check_then_passes(tmp_path):
    (tmp_path / "test_time_gain_x.json").write_text(json.dumps(_result([0, 0, 1, 0], [[1, 0, 1, 0]])))
    readme = tmp_path / "README.md"
    readme.write_text(f"# R\n\n{rt.BEGIN}\nstale\n{rt.END}\ntail\n")
    assert rt.write(readme, tmp_path) == 1
    assert rt.check(readme, rt.table(tmp_path)) == "" and readme.read_text().endswith("tail\n")


def _transfer(control: list[int], afters: list[list[int]], **stated) -> dict:
    ids = [f"P/{k}" for k in range(len(control))]
    ups = sum(sum(1 for c, x in zip(control, a) if x and not c) for a in afters)
    downs = sum(sum(1 for c, x in zip(control, a) if c and not x) for a in afters)
    return {
        "source": "docs/results/test_time_gain_x.json",
        "transfer": {"problems": ids, "flips_gained": ups, "flips_lost": downs, "ci95": [-0.1, 0.3], **stated},
        "per_problem": {
            "control": [dict(zip(ids, map(float, control)))] * 2,
            **{f"seed{s}": dict(zip(ids, map(float, a))) for s, a in enumerate(afters)},
        },
    }


def test_a_transfer_row_is_per_seed_and_recomputed():
    row = rt.transfer_row("transfer_x.json", _transfer([0, 0, 0, 1], [[1, 1, 0, 1], [0, 1, 0, 0]]))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "test_time_gain_x.json's weights on 4 others"
    assert cells[4] == "0.250" and cells[5] == "0.750, 0.250" and cells[6] == "+2 / -0, +1 / -1"
    with pytest.raises(rt.Inconsistent, match="transfer_x.json"):
        rt.transfer_row("transfer_x.json", _transfer([0, 0, 0, 1], [[1, 1, 0, 1]], flips_gained=3))


def test_a_filtered_row_is_recomputed_from_the_select_visible_outcomes():
    ids = [f"P/{k}" for k in range(10)]
    before = dict(zip(ids, [1.0, 1.0] + [0.0] * 8))
    after = dict(zip(ids, [1.0, 0.0] + [1.0] * 7 + [0.0]))  # +7 / -1
    body = {
        "benchmark": "mbpp",
        "rounds": 3,
        "select_visible": {
            "n": 8,
            "seed": 0,
            "per_problem_control": before,
            "per_problem_after": after,
            "flips_gained": 7,
            "flips_lost": 1,
        },
    }
    cells = [c.strip() for c in rt.select_row("r.json", body).strip("|").split("|")]
    assert cells[0] == "`r.json` (filtered by the visible examples, n=8, seed 0)"
    assert cells[4:8] == ["0.200", "0.800", "+7 / -1", "0.07"]  # exact McNemar: 2 * P(X <= 1 | 8, 1/2) = 0.0703
    with pytest.raises(rt.Inconsistent, match="r.json"):
        rt.select_row("r.json", {**body, "select_visible": {**body["select_visible"], "flips_gained": 6}})
    assert rt.select_row("r.json", {"rounds": 3}) is None  # no filtered evaluation: no row
    unscored = {
        **body["select_visible"],
        "per_problem_control": {**before, "X/1": None},
        "per_problem_after": {**after, "X/1": None},
    }
    cells = [c.strip() for c in rt.select_row("r.json", {**body, "select_visible": unscored}).strip("|").split("|")]
    assert cells[1] == "mbpp 10" and cells[4:6] == ["0.200", "0.800"]  # a problem nobody could score counts nowhere
