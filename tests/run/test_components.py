"""`Components` is the run's immutable wiring: what the run learns between rounds is a value
the loop holds (pipeline/plan.py `RunState`), never a mutable field here."""

from dataclasses import fields

from unified.run.components import Components


def test_components_hold_no_mutable_state():
    mutable = [f.name for f in fields(Components) if str(f.type).split("[")[0] in ("dict", "list", "set")]
    assert Components.__dataclass_params__.frozen and mutable == []
    assert "start_state" in {f.name for f in fields(Components)}  # the state the run resumed with, as a value
