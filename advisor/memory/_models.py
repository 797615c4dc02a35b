"""Model architectures: the catalog in knowledge/models.yaml, HF config.json parsing, parameter counts.

Parameter counts are computed from the architecture (never copied from the catalog) so the tests can
hold them against the publishers' numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor import limits
from advisor.datafiles import load_knowledge
from advisor.errors import ConfigError
from advisor.inputfile import read_text

from . import _hybrid

if TYPE_CHECKING:
    from advisor.load import VerlConfig

_MODEL_PATH_KEY = "actor_rollout_ref.model.path"


@dataclass(frozen=True)
class ModelSpec:
    """The shapes of one decoder-only transformer (field names follow HF config.json)."""

    name: str
    family: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tie_embeddings: bool
    max_position_embeddings: int
    qkv_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0
    dense_layers: int = 0
    expert_bias: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    extra_params: int = 0
    max_image_tokens: int = 0  # a VLM's largest image in tokens (its processor's max_pixels)
    # hybrid decoders (see _hybrid): Qwen3-Next/Qwen3.5 Gated DeltaNet layers, Nemotron-H Mamba-2 blocks
    full_attention_interval: int = 0
    hybrid_pattern: str = ""
    attn_output_gate: bool = False  # q_proj also emits a sigmoid gate per head (Qwen3-Next, Qwen3.5)
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    mamba_heads: int = 0
    mamba_head_dim: int = 0
    mamba_state: int = 0
    mamba_groups: int = 0
    mamba_conv_kernel: int = 0
    gated_mlp: bool = True  # False: up/down only (Nemotron-H's squared-ReLU experts)
    mtp_layers: int = 0  # multi-token-prediction layers of the checkpoint (trained only with model.mtp.enable)
    published_params_b: float | None = None
    published_active_params_b: float | None = None
    source: str = ""
    aliases: tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def params(self) -> int:
        """All parameters (language model plus extra towers)."""
        return total_params(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "params_b": round(total_params(self) / 1e9, 3),
            "active_params_b": round(active_params(self) / 1e9, 3),
            "layers": self.layers,
            "hidden": self.hidden,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "vocab": self.vocab,
            "experts": self.experts,
            "max_position_embeddings": self.max_position_embeddings,
            "kv_bytes_per_token_bf16": kv_bytes_per_token(self, 2),
            "attention_layers": _hybrid.attention_layers(self),
            "state_bytes_per_sequence_bf16": _hybrid.state_bytes_per_sequence(self, 1, 2),
            "source": self.source,
        }


# ---------------------------------------------------------------------------------------------
# Parameter counting


def attention_params(spec: ModelSpec) -> int:
    """Parameters of one attention block (projections, biases, q/k norms)."""
    h = spec.hidden
    if spec.is_mla:
        qk_head = spec.qk_nope_head_dim + spec.qk_rope_head_dim
        if spec.q_lora_rank:
            q = h * spec.q_lora_rank + spec.q_lora_rank + spec.q_lora_rank * spec.heads * qk_head
        else:
            q = h * spec.heads * qk_head
        kv_a = h * (spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.kv_lora_rank
        kv_b = spec.kv_lora_rank * spec.heads * (spec.qk_nope_head_dim + spec.v_head_dim)
        out = spec.heads * spec.v_head_dim * h
        return q + kv_a + kv_b + out
    q_dim = spec.heads * spec.head_dim
    kv_dim = spec.kv_heads * spec.head_dim
    gate = q_dim if spec.attn_output_gate else 0  # Qwen3-Next: q_proj out = heads x head_dim x 2
    weights = h * (q_dim + gate) + 2 * h * kv_dim + q_dim * h
    bias = (q_dim + 2 * kv_dim) if spec.qkv_bias else 0
    if spec.family == "gpt_oss":  # o_proj bias and one learned attention sink per head
        bias += h + spec.heads
    norms = 2 * spec.head_dim if spec.qk_norm else 0
    return weights + bias + norms


def _gated_mlp_params(hidden: int, width: int, gated: bool = True) -> int:
    return (3 if gated else 2) * hidden * width  # gate, up and down projections (SwiGLU / GeGLU); up/down


def mlp_params(spec: ModelSpec, layer: int) -> int:
    """Parameters of the MLP (dense, or routed experts + shared experts + router) of one layer."""
    h = spec.hidden
    if not _hybrid.has_mlp(spec, layer):
        return 0
    if not spec.is_moe or layer < spec.dense_layers or _hybrid.mixer_of(spec, layer) == _hybrid.MLP:
        return _gated_mlp_params(h, spec.intermediate, spec.gated_mlp)
    per_expert = _gated_mlp_params(h, spec.moe_intermediate, spec.gated_mlp)
    if spec.expert_bias:
        per_expert += 2 * spec.moe_intermediate + h
    router = h * spec.experts + (spec.experts if spec.expert_bias else 0)
    shared = _gated_mlp_params(h, spec.shared_expert_intermediate, spec.gated_mlp)
    if spec.shared_expert_intermediate and spec.family.startswith(("qwen2_moe", "qwen3_next", "qwen3_5_moe")):
        shared += h  # the sigmoid gate on the shared expert (Qwen2-MoE, Qwen3-Next shared_expert_gate)
    return spec.experts * per_expert + router + shared


def mixer_params(spec: ModelSpec, layer: int) -> int:
    """The token mixer of one layer: attention, Gated DeltaNet or Mamba-2 (0 for an MLP-only block)."""
    mixer = _hybrid.mixer_of(spec, layer)
    if mixer == _hybrid.LINEAR:
        return _hybrid.gated_deltanet_params(spec)
    if mixer == _hybrid.MAMBA:
        return _hybrid.mamba2_params(spec)
    return attention_params(spec) if mixer == _hybrid.ATTENTION else 0


def layer_params(spec: ModelSpec, layer: int) -> int:
    return mixer_params(spec, layer) + mlp_params(spec, layer) + spec.norms_per_layer * spec.hidden


def mtp_params(spec: ModelSpec) -> int:
    """The multi-token-prediction layers (DeepSeek-V3 style, as MiMo and Qwen3-Next ship them): per layer
    two RMSNorms over the hidden state and the next token's embedding, a 2h -> h projection, one decoder
    layer (full attention, the model's MLP) and a final norm; embedding and lm_head shared."""
    if not spec.mtp_layers:
        return 0
    plain = replace(spec, full_attention_interval=0, hybrid_pattern="")
    per_layer = 3 * spec.hidden + 2 * spec.hidden * spec.hidden + layer_params(plain, spec.layers - 1)
    return spec.mtp_layers * per_layer


def embedding_params(spec: ModelSpec) -> int:
    """Input embeddings, plus the lm_head when it is not tied to them."""
    return spec.vocab * spec.hidden * (1 if spec.tie_embeddings else 2)


def total_params(spec: ModelSpec) -> int:
    layers = sum(layer_params(spec, i) for i in range(spec.layers))
    return layers + embedding_params(spec) + spec.hidden + spec.extra_params


def active_params(spec: ModelSpec) -> int:
    """Parameters one token passes through (= total for dense models)."""
    if not spec.is_moe:
        return total_params(spec)
    dense = replace(spec, experts=spec.experts_per_token)
    return total_params(dense)


def largest_layer_params(spec: ModelSpec) -> int:
    return max(layer_params(spec, i) for i in range(spec.layers))


def expert_params(spec: ModelSpec) -> int:
    """Parameters of all routed experts (what expert parallelism shards)."""
    if not spec.is_moe:
        return 0
    per_expert = _gated_mlp_params(spec.hidden, spec.moe_intermediate, spec.gated_mlp)
    if spec.expert_bias:
        per_expert += 2 * spec.moe_intermediate + spec.hidden
    moe_layers = _hybrid.count(spec, _hybrid.MOE) if spec.hybrid_pattern else spec.layers - spec.dense_layers
    return moe_layers * spec.experts * per_expert


def token_mlp_width(spec: ModelSpec) -> int:
    """MLP width one token's activations pass through (k routed experts + shared for MoE)."""
    if not spec.is_moe:
        return spec.intermediate
    return spec.experts_per_token * spec.moe_intermediate + spec.shared_expert_intermediate


def kv_dim(spec: ModelSpec) -> int:
    """Width of one token's K (or V) projection output."""
    if spec.is_mla:
        return spec.kv_lora_rank + spec.qk_rope_head_dim
    return spec.kv_heads * spec.head_dim


def kv_bytes_per_token(spec: ModelSpec, dtype_bytes: int, tp: int = 1) -> int:
    """KV-cache bytes one token occupies on one tensor-parallel rank.

    Standard attention: 2 (K and V) x attention layers x kv_heads x head_dim x dtype bytes, with kv heads
    split across TP ranks (replicated when TP exceeds them); a hybrid model's linear-attention and Mamba
    layers keep no per-token cache (their state is per sequence: _hybrid.state_bytes_per_sequence). MLA
    caches one compressed latent (kv_lora_rank + qk_rope_head_dim) per layer, replicated on every rank.
    """
    if spec.is_mla:
        return spec.layers * (spec.kv_lora_rank + spec.qk_rope_head_dim) * dtype_bytes
    return _hybrid.attention_layers(spec) * kv_page_1_token(spec, dtype_bytes, tp)


def kv_page_1_token(spec: ModelSpec, dtype_bytes: int, tp: int = 1) -> int:
    """One attention layer's K and V for one token on one TP rank (vLLM FullAttentionSpec page at block 1)."""
    kv_heads_per_rank = -(-spec.kv_heads // tp) if tp > 0 else spec.kv_heads
    return 2 * kv_heads_per_rank * spec.head_dim * dtype_bytes


_LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def lora_params(spec: ModelSpec, rank: int, target_modules: str | Sequence[str] = "all-linear") -> int:
    """Trainable LoRA parameters: rank x (in + out) for each targeted linear layer of every layer.

    ``all-linear`` targets every projection of the attention and dense MLP; routed experts are
    counted once per expert when the target list names the MLP projections.
    """
    if rank <= 0:
        return 0
    h = spec.hidden
    q_dim = spec.heads * spec.head_dim
    kv = spec.kv_heads * spec.head_dim
    dims = {
        "q_proj": (h, q_dim),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q_dim, h),
    }
    width = spec.moe_intermediate if spec.is_moe else spec.intermediate
    copies = spec.experts if spec.is_moe else 1
    mlp_dims = {"gate_proj": (h, width), "up_proj": (h, width), "down_proj": (width, h)}
    if isinstance(target_modules, str):
        wanted = set(_LORA_MODULES) if target_modules in ("all-linear", "all_linear") else {target_modules}
    else:
        wanted = set(target_modules or _LORA_MODULES)
    per_layer = 0
    for name, (d_in, d_out) in dims.items():
        if name in wanted:
            per_layer += rank * (d_in + d_out)
    for name, (d_in, d_out) in mlp_dims.items():
        if name in wanted:
            per_layer += copies * rank * (d_in + d_out)
    return per_layer * spec.layers


# ---------------------------------------------------------------------------------------------
# The catalog


@cache
def _catalog() -> tuple[tuple[ModelSpec, ...], tuple[str, ...]]:
    data = load_knowledge("models.yaml")
    known = {f.name for f in fields(ModelSpec)}
    specs = []
    for entry in data["models"]:
        kwargs = {k: v for k, v in entry.items() if k in known and v is not None}
        kwargs["aliases"] = tuple(entry.get("aliases") or ())
        specs.append(ModelSpec(**kwargs))
    return tuple(specs), tuple(s.lower() for s in data.get("name_suffixes", ()))


def catalog() -> tuple[ModelSpec, ...]:
    """Every model in knowledge/models.yaml."""
    return _catalog()[0]


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


@cache
def _index() -> dict[str, ModelSpec]:
    """Every catalog name and alias -> its architecture, labelled with that name (Qwen2-7B stays Qwen2-7B)."""
    index: dict[str, ModelSpec] = {}
    for spec in catalog():
        for label in (spec.name, *spec.aliases):
            # an alias that only adds to the name (DeepSeek-V3-config) is a spelling of it, not another model
            own = label != spec.name and not _normalise(label).startswith(_normalise(spec.name))
            index.setdefault(_normalise(label), replace(spec, name=label) if own else spec)
    return index


def _basename(path: str) -> str:
    base = str(path).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    # a Hugging Face cache directory: models--Org--Name
    if base.startswith("models--"):
        base = base.split("--")[-1]
    return base


def lookup_model(name: str) -> ModelSpec | None:
    """The catalog entry for a name or path (case-insensitive, org prefix and suffixes tolerated)."""
    index = _index()
    suffixes = _catalog()[1]
    candidate = _normalise(_basename(name))
    seen = set()
    while candidate and candidate not in seen:
        seen.add(candidate)
        if candidate in index:
            return index[candidate]
        for suffix in suffixes:
            if candidate.endswith(suffix):
                candidate = candidate[: -len(suffix)]
                break
        else:
            break
    return None


# ---------------------------------------------------------------------------------------------
# Hugging Face config.json


def _first(config: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def spec_from_hf_config(config: dict[str, Any], *, name: str | None = None) -> ModelSpec:
    """Read a Hugging Face ``config.json`` dict (text part of VL configs) into a :class:`ModelSpec`.

    Raises:
        ConfigError: the dict lacks the shapes the memory model needs.
    """
    outer = config
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict) and config[nested].get("hidden_size"):
            config = {**config[nested], "model_type": config[nested].get("model_type", outer.get("model_type"))}
            break
    model_type = str(config.get("model_type") or outer.get("model_type") or "unknown")
    _check_sizes(config, outer)
    try:
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        vocab = int(_first(config, "vocab_size", default=outer.get("vocab_size")))
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"model config lacks {err} (need hidden_size, num_hidden_layers, num_attention_heads, vocab_size)",
            suggestion="pass the model's Hugging Face config.json",
        ) from err
    experts = int(_first(config, "num_experts", "n_routed_experts", "num_local_experts", default=0) or 0)
    if model_type == "nemotron_h" and not config.get("hybrid_override_pattern", "").count("E"):
        experts = 0
    moe_intermediate = int(_first(config, "moe_intermediate_size", default=0) or 0)
    if experts and not moe_intermediate:  # gpt-oss, Mixtral: intermediate_size is the expert width
        moe_intermediate = int(config.get("intermediate_size", 0))
    shared = int(_first(config, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
                        default=0) or 0)
    if not shared and config.get("n_shared_experts"):
        shared = int(config["n_shared_experts"]) * moe_intermediate
    mlp_only = config.get("mlp_only_layers") or []
    dense_layers = int(_first(config, "first_k_dense_replace", default=len(mlp_only)) or 0)
    head_dim = int(_first(config, "head_dim", default=hidden // heads))
    if config.get("kv_lora_rank"):
        head_dim = int(config.get("v_head_dim") or head_dim)
    tied = config.get("tie_word_embeddings", outer.get("tie_word_embeddings", False))
    biased_qkv = model_type in ("qwen2", "qwen2_moe", "qwen2_5_vl")
    qkv_bias = bool(_first(config, "attention_bias", "qkv_bias", default=biased_qkv))
    norms = 4 if model_type in ("gemma2", "gemma3", "gemma3_text", "glm4", "glm4v") else 2
    hybrid = _hybrid_fields(config, model_type, layers)
    if hybrid.get("hybrid_pattern"):
        norms = 1  # one RMSNorm per Nemotron-H block
    return ModelSpec(
        name=name or str(_first(outer, "_name_or_path", default=model_type)),
        family=model_type,
        layers=layers,
        hidden=hidden,
        intermediate=int(_first(config, "intermediate_size", default=4 * hidden)),
        heads=heads,
        kv_heads=int(_first(config, "num_key_value_heads", default=heads)),
        head_dim=head_dim,
        vocab=vocab,
        tie_embeddings=bool(tied),
        max_position_embeddings=int(_first(config, "max_position_embeddings",
                                           default=outer.get("max_position_embeddings", 4096))),
        qkv_bias=qkv_bias,
        qk_norm=model_type.startswith("qwen3"),
        norms_per_layer=norms,
        experts=experts,
        experts_per_token=int(_first(config, "num_experts_per_tok", "experts_per_token", default=0) or 0),
        moe_intermediate=moe_intermediate,
        shared_expert_intermediate=shared,
        dense_layers=dense_layers,
        expert_bias=model_type == "gpt_oss",
        q_lora_rank=int(config.get("q_lora_rank") or 0),
        kv_lora_rank=int(config.get("kv_lora_rank") or 0),
        qk_nope_head_dim=int(config.get("qk_nope_head_dim") or 0),
        qk_rope_head_dim=int(config.get("qk_rope_head_dim") or 0),
        v_head_dim=int(config.get("v_head_dim") or 0),
        source="config.json",
        **hybrid,
    )


# every size the memory model reads, with the least value it may take and the cap past which it is no model's
_SIZES: dict[str, tuple[int, int]] = {
    "hidden_size": (1, limits.MODEL_MAX_WIDTH), "num_hidden_layers": (1, limits.MODEL_MAX_LAYERS),
    "num_attention_heads": (1, limits.MODEL_MAX_HEADS), "vocab_size": (1, limits.MODEL_MAX_VOCAB),
    "num_key_value_heads": (1, limits.MODEL_MAX_HEADS), "head_dim": (1, limits.MODEL_MAX_WIDTH),
    "intermediate_size": (0, limits.MODEL_MAX_WIDTH), "max_position_embeddings": (1, limits.MODEL_MAX_POSITIONS),
    "num_experts": (0, limits.MODEL_MAX_EXPERTS), "n_routed_experts": (0, limits.MODEL_MAX_EXPERTS),
    "num_local_experts": (0, limits.MODEL_MAX_EXPERTS), "num_experts_per_tok": (0, limits.MODEL_MAX_EXPERTS),
    "experts_per_token": (0, limits.MODEL_MAX_EXPERTS), "n_shared_experts": (0, limits.MODEL_MAX_EXPERTS),
    "moe_intermediate_size": (0, limits.MODEL_MAX_WIDTH),
    "shared_expert_intermediate_size": (0, limits.MODEL_MAX_WIDTH),
    "moe_shared_expert_intermediate_size": (0, limits.MODEL_MAX_WIDTH),
    "first_k_dense_replace": (0, limits.MODEL_MAX_LAYERS), "q_lora_rank": (0, limits.MODEL_MAX_WIDTH),
    "kv_lora_rank": (0, limits.MODEL_MAX_WIDTH), "qk_nope_head_dim": (0, limits.MODEL_MAX_WIDTH),
    "qk_rope_head_dim": (0, limits.MODEL_MAX_WIDTH), "v_head_dim": (0, limits.MODEL_MAX_WIDTH),
    "mtp_num_hidden_layers": (0, limits.MODEL_MAX_LAYERS), "num_nextn_predict_layers": (0, limits.MODEL_MAX_LAYERS),
    "mamba_num_heads": (0, limits.MODEL_MAX_HEADS), "mamba_head_dim": (0, limits.MODEL_MAX_WIDTH),
    "ssm_state_size": (0, limits.MODEL_MAX_WIDTH), "n_groups": (0, limits.MODEL_MAX_HEADS),
    "conv_kernel": (0, limits.MODEL_MAX_WIDTH), "full_attention_interval": (0, limits.MODEL_MAX_LAYERS),
    "linear_num_key_heads": (0, limits.MODEL_MAX_HEADS), "linear_num_value_heads": (0, limits.MODEL_MAX_HEADS),
    "linear_key_head_dim": (0, limits.MODEL_MAX_WIDTH), "linear_value_head_dim": (0, limits.MODEL_MAX_WIDTH),
    "linear_conv_kernel_dim": (0, limits.MODEL_MAX_WIDTH),
}


def _check_sizes(config: dict[str, Any], outer: dict[str, Any]) -> None:
    """Refuse a size that is no model's: not a whole number (``Infinity``, ``NaN``, text), below its least value
    (0 heads or layers, a negative hidden size) or past its cap (``limits``: a 400-digit integer, 10**12
    layers), in one line naming the key. Every later computation is then bounded and divides by nothing zero."""
    import math

    for where in (config, outer) if outer is not config else (config,):
        for key, (low, high) in _SIZES.items():
            value = where.get(key)
            if value is None:
                continue
            shown = _shown(value)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    isinstance(value, float) and not (math.isfinite(value) and value.is_integer())):
                raise ConfigError(f"model config {key} is {shown}, not a whole number",
                                  suggestion="pass the model's Hugging Face config.json")
            if not low <= value <= high:
                bound = f"at least {low}" if value < low else f"at most {high:,} (no published model comes near)"
                raise ConfigError(f"model config {key} is {shown}; it must be {bound}",
                                  suggestion="pass the model's Hugging Face config.json")


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"an integer of {len(str(abs(value))):,} digits" if abs(value) < 10**4000 else "an enormous integer"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _hybrid_fields(config: dict[str, Any], model_type: str, layers: int) -> dict[str, Any]:
    """The hybrid-decoder fields of a config.json (Qwen3-Next/Qwen3.5 layer_types, Nemotron-H's pattern)."""
    out: dict[str, Any] = {}
    mtp = int(_first(config, "mtp_num_hidden_layers", "num_nextn_predict_layers", default=0) or 0)
    if mtp:
        out["mtp_layers"] = mtp
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        if len(pattern) != layers or set(pattern) - set("M*E-"):
            raise ConfigError(f"model config hybrid_override_pattern has {len(pattern)} blocks for "
                              f"num_hidden_layers={layers} (or a block other than M, *, E, -)")
        out.update(hybrid_pattern=pattern, gated_mlp=False,
                   mamba_heads=int(config.get("mamba_num_heads") or 0),
                   mamba_head_dim=int(config.get("mamba_head_dim") or 0),
                   mamba_state=int(config.get("ssm_state_size") or 0),
                   mamba_groups=int(config.get("n_groups") or 1),
                   mamba_conv_kernel=int(config.get("conv_kernel") or 4))
        return out
    types = config.get("layer_types")
    interval = int(config.get("full_attention_interval") or 0)
    if isinstance(types, list) and "linear_attention" in types:
        interval = types.index("full_attention") + 1 if "full_attention" in types else 0
        expected = ["full_attention" if interval and (i + 1) % interval == 0 else "linear_attention"
                    for i in range(layers)]
        if not interval or types != expected:
            raise ConfigError("model config layer_types is not every-Nth-layer full attention; the memory model "
                              "reads Qwen3-Next/Qwen3.5's interleave only")
    elif not config.get("linear_num_value_heads"):
        interval = 0
    if interval:
        out.update(full_attention_interval=interval,
                   attn_output_gate=bool(config.get("attn_output_gate", True)),
                   linear_key_heads=int(config.get("linear_num_key_heads") or 0),
                   linear_value_heads=int(config.get("linear_num_value_heads") or 0),
                   linear_key_head_dim=int(config.get("linear_key_head_dim") or 0),
                   linear_value_head_dim=int(config.get("linear_value_head_dim") or 0),
                   linear_conv_kernel=int(config.get("linear_conv_kernel_dim") or 4))
    return out


_MODEL_CONFIG_BYTES = limits.MODEL_CONFIG_BYTES


def _read_config_json(path: Path) -> dict[str, Any]:
    import json  # a local checkpoint only: off the start-up path

    text = read_text(path, _MODEL_CONFIG_BYTES, ConfigError, "model config.json")  # a regular file, capped
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"model config is not valid JSON ({err.msg} at line {err.lineno})", path=str(path)) from err
    except ValueError as err:  # an integer past Python's 4,300 digits
        raise ConfigError("model config holds a number too long to be a size (over 4,300 digits)",
                          path=str(path)) from err
    except RecursionError as err:
        raise ConfigError("model config nests deeper than any config.json", path=str(path)) from err
    if not isinstance(data, dict):
        raise ConfigError("model config is not a JSON object", path=str(path))
    return data


def _spec_of_file(path: Path, name: str | None) -> ModelSpec:
    """:func:`spec_from_hf_config` of a config.json file; its errors name the file."""
    config = _read_config_json(path)
    try:
        return spec_from_hf_config(config, name=name)
    except ConfigError as err:
        if err.path is not None:
            raise
        raise ConfigError(err.message, path=str(path), key=err.key, suggestion=err.suggestion) from err


def _is_file(path: Path) -> bool:
    """Path.is_file, False for a name the OS refuses (over 255 bytes: ENAMETOOLONG; a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def image_tokens_of_processor(processor: dict[str, Any]) -> int:
    """Tokens of the largest image a Qwen-VL-style processor makes: max_pixels / (patch_size x merge_size)^2.

    Qwen2-VL's image processor resizes an image to at most max_pixels and merges merge_size x merge_size
    patches of patch_size pixels into one token (transformers Qwen2VLImageProcessor smart_resize); newer
    processors write the bound as size.longest_edge. 0 when the file names neither.
    """
    size = processor.get("size")
    longest = size.get("longest_edge") if isinstance(size, dict) else None
    max_pixels = processor.get("max_pixels") or longest
    patch, merge = processor.get("patch_size"), processor.get("merge_size")
    try:
        # None or text in any of them fails here and gives 0
        tokens = int(max_pixels) // (int(patch) * int(merge)) ** 2  # type: ignore[arg-type]
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):  # OverflowError: Infinity
        return 0
    return tokens if 0 < tokens <= limits.MODEL_MAX_POSITIONS else 0  # a negative or absurd bound is no image's


def _with_processor(spec: ModelSpec, directory: Path) -> ModelSpec:
    """A local checkpoint's preprocessor_config.json sets the largest image's tokens (a VLM's encoder cache)."""
    path = directory / "preprocessor_config.json"
    if not _is_file(path):
        return spec
    import json

    try:
        processor = json.loads(read_text(path, _MODEL_CONFIG_BYTES, ConfigError, "preprocessor_config.json"))
    except (ConfigError, ValueError, RecursionError):  # ValueError: bad JSON, an integer past 4,300 digits
        return spec  # an unreadable processor file leaves the catalog's or no value, as without one
    tokens = image_tokens_of_processor(processor) if isinstance(processor, dict) else 0
    return replace(spec, max_image_tokens=tokens) if tokens else spec


def resolve_model(
    cfg: VerlConfig | None = None,
    *,
    model: str | ModelSpec | None = None,
    model_config: str | Path | dict[str, Any] | None = None,
) -> ModelSpec:
    """The architecture to estimate: ``model_config`` > ``model`` > the config's model path.

    The model path resolves to a local ``config.json`` when the directory exists, else to the catalog
    entry matching its basename (case-insensitive; ``Qwen/Qwen2.5-7B-Instruct`` -> Qwen2.5-7B). With
    ``actor_rollout_ref.model.mtp.enable`` the checkpoint's MTP layers are loaded and trained with it
    (verl's mtp_trainer examples), so they count into its parameters.

    Raises:
        ConfigError: unknown model, or an unreadable config.json.
    """
    spec = _resolve_architecture(cfg, model=model, model_config=model_config)
    if spec.mtp_layers and cfg is not None and str(cfg.get(_MTP_KEY)).lower() == "true":
        return replace(spec, extra_params=spec.extra_params + mtp_params(spec))
    return spec


_MTP_KEY = "actor_rollout_ref.model.mtp.enable"


def _resolve_architecture(
    cfg: VerlConfig | None = None,
    *,
    model: str | ModelSpec | None = None,
    model_config: str | Path | dict[str, Any] | None = None,
) -> ModelSpec:
    """The architecture to estimate: ``model_config`` > ``model`` > the config's model path.

    The model path resolves to a local ``config.json`` when the directory exists, else to the catalog
    entry matching its basename (case-insensitive; ``Qwen/Qwen2.5-7B-Instruct`` -> Qwen2.5-7B).

    Raises:
        ConfigError: unknown model, or an unreadable config.json.
    """
    if model_config is not None:
        if isinstance(model_config, dict):
            return spec_from_hf_config(model_config)
        path = Path(model_config)
        if _is_dir(path):
            path = path / "config.json"
        return _with_processor(_spec_of_file(path, name=path.parent.name or None), path.parent)
    if isinstance(model, ModelSpec):
        return model
    if model is not None:
        spec = lookup_model(model)
        if spec is None:
            raise ConfigError(
                f"model '{model}' is not in the memory catalog (knowledge/models.yaml)",
                suggestion=_unknown_hint(model),
            )
        return spec
    path_value = cfg.get(_MODEL_PATH_KEY) if cfg is not None else None
    if not path_value:
        raise ConfigError(f"{_MODEL_PATH_KEY} is not set", key=_MODEL_PATH_KEY,
                          suggestion="pass --model-config path/to/config.json (the model's Hugging Face config.json)")
    local = Path(str(path_value)).expanduser() / "config.json"
    if _is_file(local):
        return _with_processor(_spec_of_file(local, name=local.parent.name), local.parent)
    spec = lookup_model(str(path_value))
    if spec is None:
        raise ConfigError(
            f"{_MODEL_PATH_KEY}='{path_value}' is not a local checkpoint and its name is not in the memory catalog",
            key=_MODEL_PATH_KEY,
            suggestion=_unknown_hint(str(path_value)),
        )
    return spec


def _unknown_hint(name: str) -> str:
    from advisor.spelling import closest

    labels = [s.name for s in catalog()] + [a for s in catalog() for a in s.aliases]
    close = closest(_basename(name), labels, limit=1, extra_suffix=True)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return hint + ("pass --model-config path/to/config.json (the model's Hugging Face config.json); the catalog "
                   "(knowledge/models.yaml) holds the models of verl's examples")


