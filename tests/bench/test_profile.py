"""bench/engine_profile.py's grouping of a profile: each operator's self time counts once,
under the group that names what it is, and the wall time no operator accounts for is
"outside torch ops" (no timing is asserted, only the bookkeeping)."""

import pytest

from bench import engine_profile as ep


@pytest.mark.parametrize(
    "name, group",
    [
        ("_C::onednn_mm", "matrix products"),
        ("_C::weight_packed_linear", "matrix products"),
        ("aten::addmm", "matrix products"),
        ("_C::cpu_attention_with_kv_cache", "attention"),
        ("_C::cpu_attn_reshape_and_cache", "attention"),
        ("_C::fused_gumbel_argmax", "sampling"),
        ("aten::_log_softmax", "sampling"),
        ("aten::copy_", "element-wise"),
        ("aten::silu", "element-wise"),
        ("_C::rotary_embedding", "element-wise"),
        ("aten::view", ep.OTHER),
        ("TorchDynamo Cache Lookup", ep.OTHER),
    ],
)
def test_each_operator_lands_in_the_group_that_names_it(name, group):
    assert ep.group_of(name) == group


def test_groups_add_up_to_the_wall_time_with_the_rest_outside_torch():
    ops = {
        "_C::onednn_mm": 3.0,
        "_C::cpu_attention_with_kv_cache": 2.0,
        "_C::fused_gumbel_argmax": 1.0,
        "aten::mul": 0.5,
        "aten::view": 0.5,
    }
    g = ep.grouped(ops, wall_s=10.0)
    assert g["matrix products"] == {"seconds": 3.0, "share": 0.3}
    assert g["attention"]["seconds"] == 2.0 and g["sampling"]["seconds"] == 1.0
    assert g["element-wise"]["seconds"] == 0.5 and g[ep.OTHER]["seconds"] == 0.5
    assert g[ep.OUTSIDE] == {"seconds": 3.0, "share": 0.3}
    assert sum(v["seconds"] for v in g.values()) == pytest.approx(10.0)
    # a profile whose operators overlap the wall clock (threads) never makes "outside" negative
    assert ep.grouped({"_C::onednn_mm": 12.0}, wall_s=10.0)[ep.OUTSIDE]["seconds"] == 0.0
