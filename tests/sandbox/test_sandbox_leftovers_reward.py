"""End to end: an induction answer that knows nothing of the function, only where a
phase-2 program left its (input, output) pairs, earns 0. Both programs pass the default
policy's static check (`io.FileIO`, `os.mkdir`), so only the
fresh world each call starts in stands between them."""

import pytest

from unified.kinds import induction
from unified.kinds.base import BuildOptions
from unified.pipeline import ipo
from unified.pipeline.rewards import score_batch
from unified.sandbox.executor import Executor, ExecutorConfig
from unified.types import Problem, Program, TestCase

DEPTH = 1100  # deeper than a recursive delete can go in the zygote

LEAKER = f"""
import io, os
def f(x):
    path = '/tmp'
    for _ in range({DEPTH}):
        path += '/d'
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
    with io.FileIO(path + '/pairs', 'a') as fh:  # passes the Python-level guards
        fh.write((repr(x) + ' ' + repr((x * 7919) % 10007) + '\\n').encode())
    return (x * 7919) % 10007
"""

READER = f"""def f(x):
    try:
        with open('/tmp' + '/d' * {DEPTH} + '/pairs') as fh:
            for line in fh:
                a, b = line.split()
                if int(a) == x:
                    return int(b)
    except OSError:
        pass
    return -1
"""

PROBLEM = Problem("Toy/leak", "toy", "Scramble x.", "f", (TestCase((1,), 7919),))


@pytest.fixture(scope="module")
def pool():
    with Executor(ExecutorConfig(workers=2, timeout_s=2.0, memory_mb=256)) as ex:
        if not ex.isolation.get("pidns"):
            pytest.skip("kernel isolation needs root")
        yield ex


def test_an_induction_answer_that_reads_leftovers_earns_nothing(pool):
    program = Program(PROBLEM.problem_id, "Toy/leak#p0", LEAKER, "f")
    inputs = [ipo.Input(PROBLEM.problem_id, (k,), "visible" if k == 1 else "proposed") for k in (1, 2, 3, 4, 5)]
    triples, rejections = ipo.execute([program], inputs, pool.run_twice, 10_000)
    assert len(triples) == 5 and not rejections, rejections  # the leaking program itself runs fine
    (task,), _ = induction.build(PROBLEM, program, triples, BuildOptions(shown_pairs=1))
    cheat = f"<answer>\n```python\n{READER}```\n</answer>"
    honest = "<answer>\n```python\ndef f(x):\n    return (x * 7919) % 10007\n```\n</answer>"
    assert score_batch([(task, honest), (task, cheat)], pool.run_batch) == [(1.0, None), (0.0, None)]
