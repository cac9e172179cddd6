"""A console that starts with the program's own words.

vLLM, Triton, torch and transformers print about twenty lines at start-up that tell a
user nothing they can act on (deprecations inside vLLM, "Triton is not installed" next to
"Triton is installed, but ...", thread-binding notes repeated per worker, NUMA binding,
weight-loading bars). `quiet_console()` silences them before those libraries are
imported: it only sets environment variables and warning filters, so it must run first
(train_unified.py and `python -m unified.eval` call it before importing torch; every
torchrun rank runs the same code). Errors still print. `-v` / `trainer.verbose=true`
(or `--verbose` for the evaluation CLI) keeps everything, at vLLM's INFO level.

A variable the user set explicitly is never overridden.
"""

from __future__ import annotations

import logging
import os
import warnings

QUIET_ENV = {
    "VLLM_LOGGING_LEVEL": "ERROR",  # vLLM's start-up WARNINGs (chunked prefill, LD_PRELOAD, set_num_threads x4, ...)
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # c10 warnings such as "NUMA binding: Using MEMBIND policy"
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # "Loading weights" bars of a model that loads in a second
    "TOKENIZERS_PARALLELISM": "false",  # the fork warning of HF tokenizers
    "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning",  # child processes too
}
VERBOSE_ENV = {"VLLM_LOGGING_LEVEL": "INFO"}


def quiet_console(verbose: bool = False) -> None:
    """Set the environment and warning filters for a quiet (or, verbose, a full) console."""
    for key, value in (VERBOSE_ENV if verbose else QUIET_ENV).items():
        os.environ.setdefault(key, value)
    if verbose:
        return
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(torch|vllm|transformers|triton)(\.|$)")
    # printed by vllm.triton_utils while it is being imported, before VLLM_LOGGING_LEVEL applies
    logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
