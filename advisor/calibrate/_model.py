"""A Hugging Face causal LM of a catalog shape, built on ``meta`` and materialised as fake tensors.

No weights are downloaded: the config is built from the catalog's dimensions (or a config.json) with
transformers' config classes. LoRA is applied while the model is still on ``meta`` because PEFT's
``.to()`` fails on fake tensors; ``to_empty`` under ``FakeTensorMode`` then gives every parameter a
fake storage on the fake device ``cpu``.
"""

from __future__ import annotations

from typing import Any

import torch

from advisor.errors import ConfigError
from advisor.memory import ModelSpec

from ._kernels import flash_attention_standin

ATTENTION = "verl_varlen_standin"  # a name with "flash" in it sends transformers to its flash loader

# model_type -> transformers config class name; dense decoders whose layers HF builds the same way
_CONFIGS = {"qwen2": "Qwen2Config", "qwen3": "Qwen3Config", "llama": "LlamaConfig", "mistral": "MistralConfig"}


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, flash_attention_standin)


def hf_config(spec: ModelSpec, *, layers: int | None = None, vocab: int | None = None) -> Any:
    """transformers config of ``spec`` (optionally fewer layers or another vocab, for slopes)."""
    import transformers

    name = _CONFIGS.get(spec.family)
    if name is None or spec.is_moe or spec.is_mla:
        raise ConfigError(f"the calibration harness builds dense {', '.join(sorted(_CONFIGS))} models; "
                          f"{spec.name} is {spec.family}{' (MoE)' if spec.is_moe else ''}",
                          suggestion="pass --model-config of a dense model")
    kwargs: dict[str, Any] = dict(
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=layers or spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        head_dim=spec.head_dim,
        vocab_size=vocab or spec.vocab,
        tie_word_embeddings=spec.tie_embeddings,
        max_position_embeddings=spec.max_position_embeddings,
        use_cache=False,
    )
    if spec.family in ("llama", "mistral", "qwen3"):
        kwargs["attention_bias"] = spec.qkv_bias
    config = getattr(transformers, name)(**kwargs)
    config.use_cache = False
    return config


def build_model(spec: ModelSpec, fake_mode: Any, *, layers: int | None = None, vocab: int | None = None,
                lora_rank: int = 0, lora_targets: Any = "all-linear", gradient_checkpointing: bool = False,
                value_head: bool = False, device: str = "cpu") -> torch.nn.Module:
    """The actor (causal LM) or, with ``value_head``, the critic (backbone + 1-wide head), on fake tensors
    (``fake_mode``) or, with ``fake_mode=None``, on real ones of ``device`` with small random weights.

    verl: bf16 compute weights (FSDP MixedPrecision param_dtype), ``gradient_checkpointing_enable(
    gradient_checkpointing_kwargs={"use_reentrant": False})``, PEFT ``LoraConfig(target_modules=
    "all-linear")`` by default, the critic an AutoModelForTokenClassification with num_labels=1.
    """
    import transformers

    _register_attention()
    config = hf_config(spec, layers=layers, vocab=vocab)
    config._attn_implementation = ATTENTION
    with torch.device("meta"):
        if value_head:
            config.num_labels = 1
            model = transformers.AutoModelForTokenClassification.from_config(config, dtype=torch.bfloat16,
                                                                              attn_implementation=ATTENTION)
        else:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                                                 attn_implementation=ATTENTION)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora_rank:
        import peft

        lora = peft.LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules=lora_targets,
                               lora_dropout=0.0, bias="none")
        # on meta: PEFT's .to() fails on fake tensors. Adapters in bf16: verl's FSDP MixedPrecision casts them to
        # param_dtype for compute, where PEFT's default would keep them in fp32 (autocast_adapter_dtype)
        model = peft.get_peft_model(model, lora, autocast_adapter_dtype=False)
    if fake_mode is None:
        model.to_empty(device=device)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.02)
    else:
        with fake_mode:
            model.to_empty(device="cpu")
    model.train()
    return model


