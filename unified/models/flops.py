"""FLOPs per token of a decoder-only Hugging Face model (Llama/Qwen2 layout), from its config.

Only matrix products count (2 FLOPs per multiply-add); norms, activations, rotary, softmax
and the attention over the context (4 x layers x context x heads x head_dim per token) do
not, so the achieved rates derived from these are lower bounds of the work done.

- `P_block`: the products of one block: q, o (hidden x heads*head_dim), k, v (hidden x
  kv_heads*head_dim), gate, up, down (hidden x intermediate).
- `P_head`: the LM head, vocab x hidden (with tied embeddings the same tensor as the input
  embedding, whose lookup is no product: it counts once).
- generation, per generated token: 2 x (layers x P_block + P_head) = 2 x parameters (less
  norms). SmolLM2-135M: 2 x 134.5 M = 0.269 GFLOP.
- training, per trained token: forward 2 x (layers x P_block + P_head); backward: the input
  gradient (2 x P) of every block from the lowest that trains upward and of the head, the
  weight gradient (2 x P) of what trains; LoRA adds its adapters' forward, input and weight
  gradients (2 + 2 + 2 x P_lora, P_lora = r x (in + out) per adapted product). SmolLM2 with
  the top 4 blocks training: 0.269 + 2 x 4 x P_block (dX) + 2 x P_head (the head's dX) +
  2 x 4 x P_block (dW) = 0.382 GFLOP.
- a training step: the head only runs on the positions that predict response tokens
  (`logits_to_keep`), so `step_flops` counts the blocks' share for every real token and the
  head's share for the response tokens only.
"""

from __future__ import annotations

PRODUCTS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

GENERATION_FORMULA = "2 x (layers x P_block + P_head) per generated token (matrix products only; attention over the context and the prompt's prefill not counted)"
TRAINING_FORMULA = (
    "per trained token: forward 2 x (layers x P_block + P_head) + backward input gradient 2 x P of every block "
    "from the lowest trainable one up and of the head + weight gradient 2 x P of what trains (+ LoRA adapters: "
    "2 x 3 x P_lora); per step the head's share counts only response tokens (logits_to_keep)"
)


def product_shapes(config: dict) -> dict[str, tuple[int, int]]:
    """(in, out) of each product of one block."""
    h, i = int(config["hidden_size"]), int(config["intermediate_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or h // heads)
    kv = int(config.get("num_key_value_heads") or heads) * head_dim
    q = heads * head_dim
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


def block_params(config: dict) -> int:
    return sum(a * b for a, b in product_shapes(config).values())


def head_params(config: dict) -> int:
    return int(config["vocab_size"]) * int(config["hidden_size"])


def generation_flops_per_token(config: dict) -> int:
    return 2 * (int(config["num_hidden_layers"]) * block_params(config) + head_params(config))


def lora_params(config: dict, r: int, targets=PRODUCTS) -> int:
    shapes = product_shapes(config)
    return int(config["num_hidden_layers"]) * sum(r * (a + b) for name, (a, b) in shapes.items() if name in targets)


def training_flops(config: dict, method: str, trainable_layers: int = 4, lora_r: int = 16, targets=PRODUCTS) -> dict:
    """FLOPs per token: `block` (every real token), `head` (every token whose logits are
    computed), `per_token` (both: the figure when every token gets logits)."""
    layers, p_block, p_head = int(config["num_hidden_layers"]), block_params(config), head_params(config)
    lora = lora_params(config, lora_r, targets) if method == "lora" else 0
    backward_blocks = trainable_layers if method == "top_layers" else layers  # input gradients flow down to here
    trained_blocks = {"top_layers": trainable_layers, "full": layers}.get(method, 0)
    block = 2 * layers * p_block + 2 * backward_blocks * p_block + 2 * trained_blocks * p_block + 6 * lora
    head = 2 * p_head + 2 * p_head + (2 * p_head if method == "full" else 0)  # forward, dX, dW when it trains
    return {"block": block, "head": head, "per_token": block + head, "lora_params": lora, "method": method}


def step_flops(per: dict, tokens: int, response_tokens: int) -> int:
    """One optimizer step's FLOPs: the blocks for every real token, the head for the response's."""
    return per["block"] * tokens + per["head"] * response_tokens
