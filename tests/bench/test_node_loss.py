"""bench/node_loss.py's summary of its repeats: medians, the extra seconds a loss cost being the
median of each repeat's own difference (not the difference of the medians, which pairs a
repeat's loss with another repeat's undisturbed run). No timing is asserted."""

from bench.node_loss import Repeat, cost


def test_a_loss_costs_the_median_of_each_repeats_difference():
    runs = [Repeat(10.0, 30.0, 4, {}), Repeat(12.0, 20.0, 4, {}), Repeat(50.0, 51.0, 3, {})]
    assert cost(runs) == {"repeats": 3, "undisturbed_s": 12.0, "lost_s": 30.0, "extra_s": 8.0, "retried_calls": 4}
