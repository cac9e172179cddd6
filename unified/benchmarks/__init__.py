"""Benchmarks: problems in, and the hidden tests' verdicts out.

    load.py            load_problems: MBPP+ (bundled), HumanEval, a JSONL/Parquet file, a hub dataset
    mbpp.py            MBPP+'s rows -> Problems (visible: base inputs; hidden: plus inputs)
    humaneval.py       HumanEval's rows -> Problems (visible: docstring examples; hidden: check code)
    check_recorder.py  HumanEval's check code -> (input, expected) cases, in a separate process
    oracle.py          EvalPlus's comparison rules (the parent compares; the sandbox only returns values)
    hidden.py          the ONE module that reads `Problem.hidden`: expected outputs, calls, verdicts

Training never reads the hidden tests: nothing outside `hidden.py` and `unified/eval/` does
(tests/pipeline/test_hidden_firewall.py).
"""
