"""A PipelineConfig built alone, for tests of a stage without a TrainConfig: its derived keys
(None in the class, filled by `schema.derive` from the groups they follow) get the standalone
values these tests were written against; keyword arguments set any field."""

from unified.kinds import SELF_PLAY
from unified.pipeline.config import DERIVED, INPUTS, PipelineConfig

STANDALONE = {
    "num_programs": 4,
    "program_temperature": 0.8,
    "program_max_tokens": 256,
    "input_max_tokens": 192,
    "seed_programs": "none",
    "kinds": SELF_PLAY,
    "mix": (),
    "constrain": (*SELF_PLAY, INPUTS),
}
assert set(STANDALONE) == set(DERIVED), "a derived key without a standalone value"


def pipeline_config(**fields) -> PipelineConfig:
    return PipelineConfig(**{**STANDALONE, **fields})
