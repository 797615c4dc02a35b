"""Hybrid decoders: which layers mix tokens by full attention, Gated DeltaNet or Mamba-2, and what each costs.

Qwen3-Next and Qwen3.5 interleave Gated DeltaNet ("linear attention") layers with full-attention layers
(``full_attention_interval``: layer i is full attention when (i + 1) % interval == 0, transformers
Qwen3NextConfig/Qwen3_5TextConfig ``layer_types``); Nemotron-H spells one mixer per block in
``hybrid_override_pattern`` (M Mamba-2, * attention, E MoE, - MLP). Only full-attention layers keep a KV
cache per token; a linear-attention or Mamba layer keeps one recurrent state per sequence.

The functions take the model spec duck-typed (:class:`HybridSpec`, the fields of ``_models.ModelSpec`` they read,
which follow knowledge/models.yaml), so this module imports nothing of the memory package.
"""

from __future__ import annotations

from typing import Protocol

ATTENTION, LINEAR, MAMBA, MOE, MLP = "attention", "linear", "mamba", "moe", "mlp"
_PATTERN = {"*": ATTENTION, "M": MAMBA, "E": MOE, "-": MLP}


class HybridSpec(Protocol):
    """What these functions read of a model spec (``advisor.memory._models.ModelSpec`` has every field)."""

    @property
    def layers(self) -> int: ...
    @property
    def hidden(self) -> int: ...
    @property
    def hybrid_pattern(self) -> str: ...
    @property
    def full_attention_interval(self) -> int: ...
    @property
    def linear_key_heads(self) -> int: ...
    @property
    def linear_value_heads(self) -> int: ...
    @property
    def linear_key_head_dim(self) -> int: ...
    @property
    def linear_value_head_dim(self) -> int: ...
    @property
    def linear_conv_kernel(self) -> int: ...
    @property
    def mamba_heads(self) -> int: ...
    @property
    def mamba_head_dim(self) -> int: ...
    @property
    def mamba_state(self) -> int: ...
    @property
    def mamba_groups(self) -> int: ...
    @property
    def mamba_conv_kernel(self) -> int: ...


def mixer_of(spec: HybridSpec, layer: int) -> str:
    """The token mixer of one layer (Nemotron-H: of one block, which may be an MLP-only block)."""
    if spec.hybrid_pattern:
        return _PATTERN[spec.hybrid_pattern[layer]]
    if spec.full_attention_interval and (layer + 1) % spec.full_attention_interval:
        return LINEAR
    return ATTENTION


def count(spec: HybridSpec, kind: str) -> int:
    return sum(1 for i in range(spec.layers) if mixer_of(spec, i) == kind)


def attention_layers(spec: HybridSpec) -> int:
    """Layers that keep a KV cache per token."""
    if not (spec.hybrid_pattern or spec.full_attention_interval):
        return int(spec.layers)  # ModelSpec.layers: an int (spec is untyped here to keep this module a leaf)
    return count(spec, ATTENTION)


def has_mlp(spec: HybridSpec, layer: int) -> bool:
    """Whether a layer carries an MLP beside its mixer (every layer but Nemotron-H's mixer-only blocks)."""
    return not spec.hybrid_pattern or mixer_of(spec, layer) in (MOE, MLP)


def _gdn_dims(spec: HybridSpec) -> tuple[int, int, int]:
    key = spec.linear_key_heads * spec.linear_key_head_dim
    value = spec.linear_value_heads * spec.linear_value_head_dim
    return key, value, 2 * key + value  # conv over q, k and v


def gated_deltanet_params(spec: HybridSpec) -> int:
    """One Gated DeltaNet layer (transformers Qwen3NextGatedDeltaNet): q/k/v/z projections, the b/a
    projections (one per value head each), the depthwise conv over q/k/v (no bias), dt_bias and A_log per
    value head, the gated RMSNorm over one value head, and the output projection."""
    h = spec.hidden
    key, value, conv_dim = _gdn_dims(spec)
    heads = spec.linear_value_heads
    params: int = (h * (2 * key + 2 * value + 2 * heads) + conv_dim * spec.linear_conv_kernel + 2 * heads
                   + spec.linear_value_head_dim + value * h)
    return params


def _mamba_dims(spec: HybridSpec) -> tuple[int, int]:
    inner = spec.mamba_heads * spec.mamba_head_dim  # vLLM nemotron_h.py: mamba_num_heads x mamba_head_dim
    return inner, inner + 2 * spec.mamba_groups * spec.mamba_state


def mamba2_params(spec: HybridSpec) -> int:
    """One Mamba-2 mixer (transformers NemotronHMamba2Mixer): in_proj to x, z, B, C and dt, the conv over
    x/B/C with a bias, A_log, D and dt_bias per head, the gated RMSNorm, and the output projection."""
    h = spec.hidden
    inner, conv_dim = _mamba_dims(spec)
    params: int = h * (inner + conv_dim + spec.mamba_heads) + conv_dim * (spec.mamba_conv_kernel + 1) \
        + 3 * spec.mamba_heads + inner + inner * h
    return params


def state_elements(spec: HybridSpec, mixer: str, tp: int) -> tuple[int, int]:
    """(conv state, recurrent state) elements of one layer for one sequence on one TP rank.

    Gated DeltaNet: vllm/model_executor/layers/mamba/mamba_utils.py:166-186 @ vllm 0.11.0
    (gated_delta_net_state_shape): conv (kernel - 1) x conv_dim / tp, recurrent (value heads / tp) x
    key head dim x value head dim. Mamba-2: mamba_utils.py:115-140 (mamba2_state_shape): conv
    (kernel - 1) x (inner + 2 x groups x state) / tp, recurrent (heads / tp) x head_dim x state.
    """
    tp = max(1, tp)
    if mixer == LINEAR:
        _, _, conv_dim = _gdn_dims(spec)
        conv = (spec.linear_conv_kernel - 1) * conv_dim // tp
        return conv, spec.linear_value_heads // tp * spec.linear_key_head_dim * spec.linear_value_head_dim
    if mixer == MAMBA:
        groups = spec.mamba_groups
        if groups % tp:  # mamba_utils.py extra_groups_for_head_shards: groups are replicated up to tp
            groups += tp - groups
        inner, _ = _mamba_dims(spec)
        conv = (spec.mamba_conv_kernel - 1) * (inner + 2 * groups * spec.mamba_state) // tp
        return conv, spec.mamba_heads // tp * spec.mamba_head_dim * spec.mamba_state
    return 0, 0


def state_layers(spec: HybridSpec) -> tuple[str, int]:
    """The recurrent mixer and how many layers use it ("" and 0 for a plain transformer)."""
    if spec.hybrid_pattern:
        return MAMBA, count(spec, MAMBA)
    if spec.full_attention_interval:
        return LINEAR, count(spec, LINEAR)
    return "", 0


def state_bytes_per_sequence(spec: HybridSpec, tp: int, dtype_bytes: int, attention_page_1_token: int = 0) -> int:
    """Recurrent state of every linear-attention/Mamba layer of one sequence on one TP rank.

    Both states are kept in the model's dtype unless ``mamba_ssm_cache_dtype`` is set
    (mamba_utils.py:47-60, 74-80 @ vllm 0.11.0). ``attention_page_1_token`` (vLLM): one layer's KV bytes
    for one token; vLLM raises the attention block size to 16 x cdiv(state page, 16 x that) tokens and pads
    each state page to the attention page (vllm/model_executor/models/config.py:314-394 @ 0.11.0,
    HybridAttentionMambaModelConfig), so each state layer takes a whole attention page.
    """
    mixer, layers = state_layers(spec)
    if not layers:
        return 0
    page = sum(state_elements(spec, mixer, tp)) * dtype_bytes
    if attention_page_1_token:
        page = attention_block_tokens(page, attention_page_1_token) * attention_page_1_token
    return layers * page


def attention_block_tokens(state_page: int, attention_page_1_token: int) -> int:
    """vLLM's attention block size for a hybrid model: 16 x cdiv(state page, 16 x one token's page)."""
    return 16 * -(-state_page // (16 * attention_page_1_token))
