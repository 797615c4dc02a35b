"""Rollout (inference engine) rules."""

from __future__ import annotations

from collections.abc import Iterator

from advisor.facts import as_int, world_size
from advisor.findings import Severity
from advisor.verl import ROLLOUT, at_least

from ._registry import CheckContext, Issue, check

ENGINES = ("vllm", "sglang", "trtllm")


@check("R001", "rollout-name-missing", Severity.ERROR, "verl/trainer/config/rollout/rollout.yaml (name: ???, required "
                                                       "since v0.6.0)",
       verl=">=0.6.0")
def rollout_name_set(ctx: CheckContext) -> Iterator[Issue]:
    """actor_rollout_ref.rollout.name has no default since verl 0.6.0."""
    if not at_least(ctx.cfg.version, "0.6.0"):
        return
    if ctx.get(f"{ROLLOUT}.name") in (None, "???"):
        yield Issue("actor_rollout_ref.rollout.name is not set (it has no default since verl 0.6.0); verl stops "
                    "with a MissingMandatoryValue error", (f"{ROLLOUT}.name",), [{f"{ROLLOUT}.name": "vllm"}],
                    "vllm is what verl's examples use")


@check("R002", "rollout-parallel-not-dividing-gpus", Severity.ERROR, "verl/workers/fsdp_workers.py:590-592 (0.6.1)",
       sources={"<0.6.0": "verl/workers/fsdp_workers.py:406 (0.4.1) (world_size % infer_tp)",
                ">=0.7.0,<0.8.0": "verl/workers/fsdp_workers.py:697-699 (0.7.1)",
                ">=0.8.0,<0.9.0": "verl/workers/engine_workers.py:600 (0.8.0)",
                ">=0.9.0": "verl/workers/engine_workers.py:655-659 (0.9.1)"})
def rollout_mesh_divides_gpus(ctx: CheckContext) -> Iterator[Issue]:
    """The GPU count must be a multiple of rollout TP × DP × PP."""
    tp = as_int(ctx.get(f"{ROLLOUT}.tensor_model_parallel_size")) or 1
    dp = as_int(ctx.get(f"{ROLLOUT}.data_parallel_size")) or 1
    pp = as_int(ctx.get(f"{ROLLOUT}.pipeline_model_parallel_size")) or 1
    gpus = world_size(ctx.cfg)
    if gpus and gpus % (tp * dp * pp):
        fixes = [{f"{ROLLOUT}.tensor_model_parallel_size": t} for t in (8, 4, 2, 1)
                 if t < tp and gpus % (t * dp * pp) == 0][:2]
        yield Issue(f"the GPU count ({gpus}) is not divisible by rollout TP × DP × PP = {tp} × {dp} × {pp}; each "
                    "inference replica needs a whole group of GPUs", (f"{ROLLOUT}.tensor_model_parallel_size",), fixes,
                    "smaller rollout TP gives more replicas (perf_tuning.rst:49-53)")


@check("R003", "rollout-expert-parallel-mismatch", Severity.ERROR, "verl/workers/config/rollout.py:203-206 (0.6.1)",
       sources={">=0.7.0,<0.7.1": "verl/workers/config/rollout.py:238-241 (0.7.0)",
                ">=0.7.1,<0.8.0": "verl/workers/config/rollout.py:264-267 (0.7.1) (not for trtllm)",
                ">=0.8.0,<0.9.0": "verl/workers/config/rollout.py:300-303 (0.8.0) (not for trtllm)",
                ">=0.9.0": "verl/workers/config/rollout.py:294-297 (0.9.1) (not for trtllm)"},
       verl=">=0.6.0")  # rollout expert/data parallel sizes arrived in 0.6
def rollout_expert_parallel(ctx: CheckContext) -> Iterator[Issue]:
    """Rollout expert_parallel_size > 1 must equal TP × DP."""
    if ctx.get(f"{ROLLOUT}.name") == "trtllm" and at_least(ctx.cfg.version, "0.7.1"):
        return  # TensorRT-LLM splits its MoE ranks its own way (moe_tensor_parallel_size × ep = tp)
    ep = as_int(ctx.get(f"{ROLLOUT}.expert_parallel_size")) or 1
    tp = as_int(ctx.get(f"{ROLLOUT}.tensor_model_parallel_size")) or 1
    dp = as_int(ctx.get(f"{ROLLOUT}.data_parallel_size")) or 1
    if ep > 1 and ep != tp * dp:
        yield Issue(f"rollout expert_parallel_size ({ep}) must equal tensor_model_parallel_size × data_parallel_size "
                    f"({tp} × {dp})", (f"{ROLLOUT}.expert_parallel_size", f"{ROLLOUT}.tensor_model_parallel_size",
                                       f"{ROLLOUT}.data_parallel_size"),
                    [{f"{ROLLOUT}.expert_parallel_size": tp * dp}])


@check("R004", "rollout-pipeline-unsupported", Severity.ERROR, "verl/workers/config/rollout.py:208-212 (0.6.1)",
       sources={">=0.7.0,<0.7.1": "verl/workers/config/rollout.py:243-247 (0.7.0)",
                ">=0.7.1,<0.8.0": "verl/workers/config/rollout.py:289-293 (0.7.1) (trtllm too)",
                ">=0.8.0,<0.9.0": "verl/workers/config/rollout.py:325-329 (0.8.0) (trtllm too)",
                ">=0.9.0": "verl/workers/config/rollout.py:317-321 (0.9.1) (trtllm too)"},
       verl=">=0.6.0")  # rollout pipeline_model_parallel_size arrived in 0.6
def rollout_pipeline(ctx: CheckContext) -> Iterator[Issue]:
    """vLLM, SGLang and TRT-LLM rollouts do not support pipeline parallelism in verl."""
    pp = as_int(ctx.get(f"{ROLLOUT}.pipeline_model_parallel_size")) or 1
    if pp > 1 and ctx.get(f"{ROLLOUT}.name") in ENGINES:
        yield Issue(f"rollout pipeline_model_parallel_size = {pp} is not implemented for "
                    f"{ctx.get(f'{ROLLOUT}.name')}", (f"{ROLLOUT}.pipeline_model_parallel_size",),
                    [{f"{ROLLOUT}.pipeline_model_parallel_size": 1}])


@check("R005", "rollout-tp-heads", Severity.ERROR,
       "vLLM/SGLang tensor parallelism: attention heads split evenly over TP")
def rollout_tp_divides_heads(ctx: CheckContext) -> Iterator[Issue]:
    """The model's attention heads must divide evenly over the rollout TP ranks (model known only)."""
    heads = as_int(getattr(ctx.model, "num_attention_heads", None))
    tp = as_int(ctx.get(f"{ROLLOUT}.tensor_model_parallel_size")) or 1
    if heads and heads % tp:
        fixes = [{f"{ROLLOUT}.tensor_model_parallel_size": t} for t in (8, 4, 2, 1)
                 if t != tp and heads % t == 0 and world_size(ctx.cfg) % t == 0][:2]
        yield Issue(f"the model has {heads} attention heads, not divisible by rollout TP {tp}",
                    (f"{ROLLOUT}.tensor_model_parallel_size",), fixes)


@check("R006", "batched-tokens-below-model-len", Severity.ERROR,
       "v0.6.1 verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py:197 (also v0.4.1:128, v0.5.0:140)",
       sources={"<0.4.0": "verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py:104 (0.3.0.post1)"},
       verl=">=0.3.0,<0.7.0")  # 0.7.0+ hands both to vLLM V1's server; verl 0.2 had no such check
def batched_tokens_hold_a_sequence(ctx: CheckContext) -> Iterator[Issue]:
    """Before verl 0.7.0, chunked prefill needs max_num_batched_tokens >= max_model_len (or prompt+response)."""
    if at_least(ctx.cfg.version, "0.7.0") or ctx.get(f"{ROLLOUT}.name") != "vllm":
        return  # 0.7.0+ hands both to vLLM V1's server, which chunks long prefills itself
    if not ctx.get(f"{ROLLOUT}.enable_chunked_prefill"):
        return
    tokens = as_int(ctx.get(f"{ROLLOUT}.max_num_batched_tokens"))
    P, R = as_int(ctx.get("data.max_prompt_length")), as_int(ctx.get("data.max_response_length"))
    model_len = as_int(ctx.get(f"{ROLLOUT}.max_model_len")) or (P + R if P is not None and R is not None else None)
    if tokens is None or model_len is None:
        return
    if tokens < model_len:
        key = f"{ROLLOUT}.max_num_batched_tokens"
        yield Issue(f"chunked prefill is on and max_num_batched_tokens ({tokens}) < max_model_len ({model_len}); "
                    "verl's vLLM rollout refuses to start", (key, f"{ROLLOUT}.enable_chunked_prefill"),
                    [{key: model_len}, {f"{ROLLOUT}.enable_chunked_prefill": False}])


# vLLM's allowed max_lora_rank values; verl takes them from vllm.config.lora.MaxLoRARanks, falling back to this
# list (0.9.1 verl/workers/rollout/vllm_rollout/utils.py:67-82 (0.7.1), 83-98 (0.9.1))
_VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def _lora_rank(ctx: CheckContext) -> int:
    """The LoRA rank verl hands vLLM: model.lora.rank, else model.lora_rank; 0 when the adapter is merged
    (0.9.1 verl/utils/config.py:205-215)."""
    if ctx.get("actor_rollout_ref.model.lora.merge"):
        return 0
    rank = as_int(ctx.get("actor_rollout_ref.model.lora.rank")) or 0
    return rank if rank > 0 else as_int(ctx.get("actor_rollout_ref.model.lora_rank")) or 0


@check("R008", "lora-rank-above-vllm-max", Severity.ERROR,
       "verl/utils/config.py:191-200 (0.7.1), 205-215 (0.9.1); "
       "verl/workers/rollout/vllm_rollout/utils.py:67-82 (0.7.1), 83-98 (0.9.1)",
       verl=">=0.7.1")
def lora_rank_vllm_supports(ctx: CheckContext) -> Iterator[Issue]:
    """A LoRA rank above vLLM's largest max_lora_rank fails validate_config before training."""
    rank = _lora_rank(ctx)
    if ctx.get(f"{ROLLOUT}.name") != "vllm" or rank <= _VLLM_LORA_RANKS[-1]:
        return
    key = "actor_rollout_ref.model.lora.rank" if ctx.get("actor_rollout_ref.model.lora.rank") else \
        "actor_rollout_ref.model.lora_rank"
    yield Issue(f"LoRA rank {rank} is above the largest rank vLLM serves ({_VLLM_LORA_RANKS[-1]}); verl's "
                "validate_config raises before training", (key,), [{key: _VLLM_LORA_RANKS[-1]}],
                "vLLM's max_lora_rank allows at most 512")


@check("R101", "max-model-len-below-sequence", Severity.WARNING,
       "verl/workers/rollout/vllm_rollout/vllm_async_server.py:382 (0.6.1) (max_tokens = max_model_len - prompt)",
       sources={">=0.8.0,<0.9.0": "verl/workers/rollout/vllm_rollout/vllm_async_server.py:474-478 (0.8.0)",
                ">=0.9.0": "verl/workers/rollout/vllm_rollout/vllm_async_server.py:593-597 (0.9.1)"},
       verl=">=0.4.0")  # the async vLLM server arrived in 0.4
def max_model_len_holds_sequence(ctx: CheckContext) -> Iterator[Issue]:
    """max_model_len below max_prompt_length + max_response_length cuts long responses short."""
    model_len = as_int(ctx.get(f"{ROLLOUT}.max_model_len"))
    P, R = as_int(ctx.get("data.max_prompt_length")), as_int(ctx.get("data.max_response_length"))
    if model_len is None or P is None or R is None or model_len >= P + R:
        return
    key = f"{ROLLOUT}.max_model_len"
    yield Issue(f"max_model_len ({model_len}) < max_prompt_length + max_response_length ({P + R}): generation is "
                "clamped to max_model_len − prompt, so long prompts get shorter answers, and a prompt over "
                f"{model_len} tokens fails", (key,), [{key: P + R}])


@check("R102", "batched-tokens-below-recommended", Severity.WARNING, "docs/perf/best_practices.rst:206-207 @1dda039b")
def batched_tokens_recommended(ctx: CheckContext) -> Iterator[Issue]:
    """max_num_batched_tokens below max(8192, prompt + response) throttles prefill."""
    tokens = as_int(ctx.get(f"{ROLLOUT}.max_num_batched_tokens"))
    P, R = as_int(ctx.get("data.max_prompt_length")), as_int(ctx.get("data.max_response_length"))
    if tokens is None or P is None or R is None:
        return
    floor = ctx.thresholds.rollout.max_num_batched_tokens_floor
    target = max(floor, P + R)
    if tokens < P + R:
        key = f"{ROLLOUT}.max_num_batched_tokens"
        yield Issue(f"max_num_batched_tokens ({tokens}) is below one prompt + response ({P + R}); best_practices "
                    f"suggests max(8192, prompt + response) = {target}", (key,), [{key: target}])


@check("R103", "val-sampling-at-zero-temperature", Severity.WARNING, "docs/perf/best_practices.rst:138-139 @1dda039b")
def val_sampling_temperature(ctx: CheckContext) -> Iterator[Issue]:
    """Validation with do_sample and temperature 0 is greedy: its n samples are identical."""
    vk = f"{ROLLOUT}.val_kwargs"
    if ctx.get(f"{vk}.do_sample") and (ctx.get(f"{vk}.temperature") or 0) <= 0:
        yield Issue("val_kwargs.do_sample is true but val_kwargs.temperature is 0: validation is greedy, so "
                    "mean@N, best@N and maj@N all equal one sample", (f"{vk}.temperature", f"{vk}.do_sample"),
                    [{f"{vk}.temperature": 1.0}],
                    "best_practices.rst:138-139 @1dda039b: a validation temperature > 0 prevents repetitive "
                    "thinking chains")


@check("R104", "rollout-max-num-seqs-default-lowered", Severity.WARNING,
       "verl/trainer/config/rollout/rollout.yaml:84 (0.9.1) (max_num_seqs: 256); "
       "verl/workers/rollout/vllm_rollout/vllm_async_server.py:333 (0.9.1) (passed to vLLM as max_num_seqs)",
       verl=">=0.9.0", trap=True)
def rollout_concurrency_default_lowered(ctx: CheckContext) -> Iterator[Issue]:
    """verl 0.9 lowered the rollout's max_num_seqs default from 1024 to 256: a run that never set it generates at
    most 256 sequences at once per engine where 0.8 ran up to 1024."""
    key = f"{ROLLOUT}.max_num_seqs"
    if not at_least(ctx.cfg.version, "0.9.0") or key in ctx.cfg.user_keys:
        return
    if ctx.get(f"{ROLLOUT}.name") not in ("vllm", "sglang"):
        return  # SGLang reads it as max_running_requests (async_sglang_server.py in 0.9.1)
    if not _fits_before(ctx, "0.9.0"):
        return  # a config written for 0.9 or later (a key 0.8.0 lacks): the lower default is the one it chose
    cap = as_int(ctx.get(key))
    per_replica = ctx.plan.responses_per_replica
    if cap is None or cap >= 1024 or not per_replica or per_replica <= cap:
        return  # the lower default does not bind: every response of a replica fits at once
    yield Issue(f"max_num_seqs is not set, and verl {ctx.cfg.version}'s default is {cap} (1024 up to verl 0.8.0, "
                f"rollout.yaml:76 there): each inference replica generates at most {cap} of its about "
                f"{per_replica:,.0f} responses at once, where verl 0.8 allowed up to {min(1024, int(per_replica)):,}; "
                "set it if the KV cache holds more (the memory check with --gpu says how much)", (key,))


def _fits_before(ctx: CheckContext, version: str) -> bool:
    """Whether every key the user set exists in the newest supported release before ``version`` (a config that
    ran there, where the older default applied)."""
    from advisor.errors import AdvisorError
    from advisor.verl import key_index, version_names

    older = [v for v in version_names() if not at_least(v, version)]
    if not older:
        return False
    try:
        index = key_index(older[-1], ctx.cfg.config_name)
    except (AdvisorError, FileNotFoundError, KeyError):
        return False
    return all(index.knows(k) for k in ctx.cfg.user_keys)
