"""The run's last line: pass@1 before -> after on its problems, and on a handful of problems
the plain words that they cannot show a gain and where the measured one is."""

from unified.run.measure import verdict


def test_a_demo_says_what_four_problems_can_show():
    line = verdict(0.25, 0.0, 4)
    assert line.startswith("greedy pass@1 on these 4 problems: 0.250 -> 0.000")
    assert "cannot show a gain" in line and "docs/results/README.md" in line


def test_a_large_run_states_only_its_figures():
    assert verdict(0.09, 0.19, 100) == "greedy pass@1 on these 100 problems: 0.090 -> 0.190"
    assert verdict(None, 0.5, 2).startswith("greedy pass@1 on these 2 problems: 0.500 after training")
