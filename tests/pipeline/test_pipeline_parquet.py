"""Each round's phase 1-4 data as Parquet, read back with pandas and `datasets`."""

from dataclasses import replace

import pandas as pd
import pytest
from datasets import Dataset

from tests.helpers.rounds import round_data as phases_1_4
from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.load import load_problems
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from unified.pipeline.parquet_io import FILES, read_tasks, write_round
from unified.pipeline.phases import RoundData
from unified.values import from_literal


@pytest.fixture(scope="module")
def round_data():
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as ex:
        problems = [replace(p, hidden=p.hidden[:3]) for p in load_problems("mbpp", ids=["Mbpp/2", "Mbpp/63"])]
        problems = with_expected_outputs(problems, ex.run_batch)
        gen = ScriptedGenerator(lambda text, s: ["no code at all"])
        yield phases_1_4(
            problems,
            gen,
            ex,
            pipeline_config(
                max_tasks=None, keep_passing_visible=True, balance_kinds=True, num_proposed_inputs=4, seed_programs="canonical"
            ),
            round_index=2,
        )


def test_round_files_read_back_with_pandas_and_datasets(round_data, tmp_path):
    paths = write_round(tmp_path / "round_2", round_data)
    assert sorted(p.name for p in (tmp_path / "round_2").iterdir()) == sorted(f"{n}.parquet" for n in FILES)
    frames = {name: pd.read_parquet(path) for name, path in paths.items()}
    sets = {name: Dataset.from_parquet(str(path)) for name, path in paths.items()}
    for name in FILES:
        assert len(frames[name]) == len(sets[name]) and list(frames[name].columns) == sets[name].column_names

    tasks = frames["tasks"]
    assert len(tasks) == len(round_data.candidate_tasks)
    assert tasks["kept"].sum() == len(round_data.tasks)
    rejected = tasks[~tasks["kept"]]
    assert rejected["rejection"].notna().all() and tasks[tasks["kept"]]["rejection"].isna().all()
    assert set(tasks["kind"]) == {"induction", "deduction", "abduction"}

    triples = frames["ipo_triples"]
    assert len(triples) == len(round_data.triples)
    first = round_data.triples[0]
    assert from_literal(triples["input"][0]) == first.args and from_literal(triples["output"][0]) == first.output
    assert isinstance(from_literal(sets["ipo_triples"][0]["input"])[0], tuple)  # MBPP+ tuples survive

    problems = frames["problems"]
    assert list(problems["problem_id"]) == ["Mbpp/2", "Mbpp/63"] and (problems["round"] == 2).all()
    programs = frames["programs"]
    assert list(programs["source"]) == ["canonical", "canonical"] and programs["kept"].all()
    rejections = frames["rejections"]
    assert len(rejections) == len(round_data.rejections)
    assert (rejections["reason"] == "no_code").sum() == 2 * pipeline_config().num_programs


def test_tasks_come_back_equal(round_data, tmp_path):
    paths = write_round(tmp_path, round_data)
    assert read_tasks(paths["tasks"]) == list(round_data.tasks)
    assert read_tasks(paths["tasks"], kept_only=False) == list(round_data.candidate_tasks)


def test_an_empty_round_writes_typed_readable_files(tmp_path):
    # (`datasets.Dataset.from_parquet` refuses any 0-row file: "corresponds to no data")
    empty = RoundData(3, (), {}, (), (), (), (), (), (), {})
    paths = write_round(tmp_path, empty)
    for path in paths.values():
        assert len(pd.read_parquet(path)) == 0
    tasks = pd.read_parquet(paths["tasks"])
    assert list(tasks.columns)[-3:] == ["kept", "rejection", "rejection_detail"] and tasks["kept"].dtype == bool
