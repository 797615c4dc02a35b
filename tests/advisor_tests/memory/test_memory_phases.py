"""Phase verdicts: the generate phase judged beside the engine's pool, unknown inputs, worst-case lengths.

Expected numbers come from the formulas written here (capacity x gpu_memory_utilization, the shard
sizes by hand), never from the estimator's own totals.
"""

from __future__ import annotations

import pytest
from memory_validation import GRPO_7B

from advisor import load_config
from advisor.checks._report import check
from advisor.memory import estimate_memory, find_memory_fix

GIB = 1024**3
H100_GIB = 81559 / 1024
GRAPHS_GIB = 1.0  # knowledge/memory.yaml inference.cuda_graph_gib_max (default capture sizes up to 512)
CONTEXT_GIB = 1.5  # knowledge/memory.yaml overhead.train_process_gib
THIN_GIB = 1.0  # knowledge/memory.yaml generate.thin_margin_gib
# NVIDIA/nccl#964: 688 MB for the 8-GPU FSDP world, 544 MB for verl 0.9.1's default rollout TP 2 group; on an
# H100 the world (above 2 GPUs) adds NVLS's nvlsPerRankSize 301989888 B (vllm-project/vllm#9699)
NVLS_GIB = 301989888 / GIB
NCCL_GIB = (688 + 544) * 1e6 / GIB + NVLS_GIB

BASE = [
    *GRPO_7B,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
]
OFFLOADED = ["actor_rollout_ref.actor.fsdp_config.param_offload=True",
             "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True"]


def cfg(*overrides: str, version: str = "0.9.1"):
    return load_config(None, verl_version=version, overrides=[*BASE, *overrides])


def _generate(*overrides: str):
    return estimate_memory(cfg(*overrides), gpu="H100").stage("generate")


@pytest.mark.parametrize("gmu", [0.8, 0.85, 0.9])
def test_a_large_vllm_pool_with_offloaded_training_state_is_ok(gmu):
    # Beside the pool only the CUDA graphs, the training process's context and the NCCL communicators stay
    # on the GPU: with everything offloaded that is 3.6 GiB against (1 - gmu) x 79.6 GiB of room. The old
    # rule (80% of the whole card) called all three tight or oom.
    g = _generate(*OFFLOADED, f"actor_rollout_ref.rollout.gpu_memory_utilization={gmu}")
    room = (1 - gmu) * H100_GIB
    assert room - (GRAPHS_GIB + CONTEXT_GIB + NCCL_GIB) > THIN_GIB
    assert g.risk == "ok"
    assert g.peak_gib == pytest.approx(gmu * H100_GIB + GRAPHS_GIB + CONTEXT_GIB + NCCL_GIB, abs=0.01)
    assert f"{gmu * H100_GIB:.1f} GiB pool" in g.basis


def test_a_thin_margin_beside_the_pool_is_tight_and_none_is_oom():
    # 3.93 GiB beside the pool: 0.93 x 79.6 leaves 5.58 GiB of room (margin 1.65, ok); 0.945 leaves 4.38
    # (margin 0.45, tight); 0.955 leaves 3.58 GiB for 3.93 (oom)
    beside = GRAPHS_GIB + CONTEXT_GIB + NCCL_GIB
    for gmu, risk in ((0.93, "ok"), (0.945, "tight"), (0.955, "oom")):
        margin = (1 - gmu) * H100_GIB - beside
        by_hand = "ok" if margin >= THIN_GIB else "tight" if margin >= 0 else "oom"
        assert by_hand == risk
        assert _generate(*OFFLOADED, f"actor_rollout_ref.rollout.gpu_memory_utilization={gmu}").risk == risk


def test_resident_actor_state_counts_beside_the_pool():
    # Not offloaded, the fp32 actor shard (4 B x 7.62B / 8 GPUs = 3.55 GiB) and its two Adam moments
    # (7.1 GiB) stay through generation (workers/engine_workers.py:810-812 @ 0.9.1 offloads only with
    # param_offload): 10.6 + 3.6 GiB must fit beside the pool.
    p_7b = 7_615_616_512
    resident = 3 * 4 * p_7b / 8 / GIB
    g = _generate("actor_rollout_ref.rollout.gpu_memory_utilization=0.8")
    assert g.peak_gib == pytest.approx(0.8 * H100_GIB + resident + GRAPHS_GIB + CONTEXT_GIB + NCCL_GIB, rel=0.01)
    assert g.risk == "ok"  # 15.9 GiB of room, 14.3 beside it
    g = _generate("actor_rollout_ref.rollout.gpu_memory_utilization=0.85")
    assert g.risk == "oom"  # 11.9 GiB of room for 14.3


def test_sglang_static_share_includes_what_the_trainer_holds_at_start_up():
    # sglang model_runner.py profile_max_num_token: KV = free after weights - total x (1 - mem_fraction_static),
    # so weights + KV + what was already on the GPU = mem_fraction_static x total. Offloaded: only the
    # training context was there.
    g = _generate(*OFFLOADED, "actor_rollout_ref.rollout.name=sglang",
                  "actor_rollout_ref.rollout.gpu_memory_utilization=0.85")
    parts = {label: gib for _cat, label, gib in g.details}
    engine_static = sum(gib for label, gib in parts.items() if label.startswith(("sglang weights", "KV cache")))
    assert engine_static + CONTEXT_GIB == pytest.approx(0.85 * H100_GIB, abs=0.01)
    assert g.risk == "ok"


def test_the_fix_text_states_the_size_of_the_gap():
    c = cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.85")
    fix = find_memory_fix(c, {"gpu": "H100"})
    g = fix.before.stage("generate")
    assert g.risk == "oom"
    assert fix.fits  # a smaller pool (or offload) fits: the gap is about 1 GiB, not "more GPUs"
    assert "more than 8x" not in fix.explanation


def test_missing_log_prob_micro_batch_is_unknown_not_a_full_batch():
    # verl refuses this config (verl/utils/config.py:153-154 @ 0.9.1); the old estimate was the whole
    # batch per GPU in one forward
    c = load_config(None, verl_version="0.9.1",
                    overrides=[o for o in BASE if "log_prob_micro" not in o])
    est = estimate_memory(c, gpu="H100")
    old = est.stage("old_log_prob")
    assert old.risk == "unknown"
    assert "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu" in old.missing
    assert est.verdict == "unknown"
    report = check(c, gpu="H100")
    m003 = [f for f in report.findings if f.id == "M003"]
    assert m003 and m003[0].severity == "info" and "old_log_prob" in m003[0].message


def test_dynamic_batching_needs_no_micro_batch():
    c = load_config(None, verl_version="0.9.1", overrides=[
        *[o for o in BASE if "micro" not in o], "actor_rollout_ref.actor.use_dynamic_bsz=True"])
    est = estimate_memory(c, gpu="H100")
    assert all(s.risk != "unknown" for s in est.stages)


def test_each_phase_shows_typical_and_worst_case_lengths():
    # gsm8k is known (373 tokens): the verdict is on typical lengths, the worst case (1536 tokens) shown beside it
    est = estimate_memory(cfg(), gpu="H100")
    upd = est.stage("actor_update")
    assert upd.lengths == "typical"
    assert upd.worst_gib is not None and upd.worst_gib > upd.peak_gib
    # an unknown dataset is estimated at max length, and says so
    unknown = estimate_memory(cfg("data.train_files=/data/mystery/train.parquet"), gpu="H100")
    upd_unknown = unknown.stage("actor_update")
    assert upd_unknown.lengths == "worst case" and upd_unknown.worst_gib is None
    assert upd_unknown.peak_gib == pytest.approx(upd.worst_gib, abs=0.01)
    assert any("unknown dataset" in a and "worst case" in a for a in unknown.assumptions)


def test_optimizer_offload_moves_adam_off_the_gpu_outside_the_update_only():
    # verl 0.9.1 FSDP engine: entering train mode loads an offloaded optimizer to the GPU for the whole
    # update context (verl/workers/engine/base.py:314-327, engine.to(optimizer=is_optimizer_offload_enabled))
    # and leaves it in CPU memory otherwise; AdamW's two fp32 moments of the 7.62B actor over 8 GPUs = 7.1 GiB
    adam = 2 * 4 * 7_615_616_512 / 8 / GIB
    est = estimate_memory(cfg("actor_rollout_ref.actor.fsdp_config.optimizer_offload=True"), gpu="H100")
    base = estimate_memory(cfg(), gpu="H100")
    assert est.stage("actor_update").breakdown["optimizer"] == pytest.approx(adam, rel=0.01)
    for phase in ("generate", "weight_sync", "old_log_prob"):
        assert est.stage(phase).breakdown["optimizer"] == 0.0
        assert base.stage(phase).breakdown["optimizer"] == pytest.approx(adam, rel=0.01)


@pytest.mark.parametrize(("version", "bytes_per_logit"), [("0.7.1", 8), ("0.9.1", 6)])
def test_update_logits_bytes_per_logit_follow_the_log_prob_code_path(version, bytes_per_logit):
    # verl < 0.8 divides the logits in place on a squeeze(0) view (dp_actor.py:258-259 @ 0.7.1): four bf16
    # [tokens x vocab] buffers in the backward; 0.9.1's engine divides out of place (fsdp/transformer_impl.py:
    # 98-103): logits + cross-entropy and entropy gradients. 8 responses x 373 gsm8k tokens, no checkpointing
    # (so the logits are their own term), entropy on.
    c = cfg("actor_rollout_ref.actor.entropy_coeff=0.01", "actor_rollout_ref.model.enable_gradient_checkpointing=False",
            "actor_rollout_ref.model.use_remove_padding=True", "actor_rollout_ref.actor.use_torch_compile=True",
            version=version)
    upd = estimate_memory(c, gpu="H100").stage("actor_update")
    tokens, vocab = 8 * (103 + 270), 152064
    assert upd.breakdown["logits"] == pytest.approx(tokens * vocab * bytes_per_logit / GIB, rel=1e-3)


def _nccl_gib(stage) -> float:
    return sum(gib for _cat, label, gib in stage.details if label.startswith("NCCL communicators"))


def test_nccl_communicators_are_counted_per_process_group():
    # NVIDIA/nccl#964: 544 MB per communicator in a 2-GPU group, 688 MB in a larger one. FSDP world of 8,
    # Ulysses SP 2 and the engine's TP 2 -> 688 + 544 + 544 MB on every phase
    c = cfg("actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=2")
    est = estimate_memory(c, gpu="H100")
    expected = (688 + 2 * 544) * 1e6 / GIB + NVLS_GIB  # NVLS on the 8-GPU world only (groups above 2)
    for stage in est.stages:
        assert _nccl_gib(stage) == pytest.approx(expected, rel=0.01)
    # no NVLS on an H800 (NVIDIA/nccl#892: "0 nvls channels") or an A100
    for gpu in ("H800", "A100-80GB"):
        other = estimate_memory(c, gpu=gpu)
        assert _nccl_gib(other.stage("actor_update")) == pytest.approx((688 + 2 * 544) * 1e6 / GIB, rel=0.01)
    single = estimate_memory(cfg("trainer.n_gpus_per_node=1", "trainer.nnodes=1",
                                 "actor_rollout_ref.rollout.tensor_model_parallel_size=1"), gpu="H100")
    assert all(_nccl_gib(s) == 0.0 for s in single.stages)


def _part(stage, prefix: str) -> float:
    return sum(gib for _cat, label, gib in stage.details if label.startswith(prefix))


@pytest.mark.parametrize(("version", "reloaded"), [("0.4.1", True), ("0.6.1", True), ("0.7.1", False),
                                                   ("0.9.1", True)])
def test_weight_sync_reloads_a_param_offloaded_actor_shard_per_version(version, reloaded):
    # 0.4-0.6: sharding_manager/fsdp_vllm.py loads the shard before waking the weights (159-160 @ 0.4.1);
    # 0.7.x: rollout_mode offloads it before resuming them (fsdp_workers.py:797-799,830-831 @ 0.7.1);
    # 0.9.1: update_weights resumes the weights, then get_per_tensor_param loads the shard
    # (engine_workers.py:782-812, engine/fsdp/transformer_impl.py:990-991). fp32 shard: 4 B x 7.62B / 8.
    shard = 4 * 7_615_616_512 / 8 / GIB
    sync = estimate_memory(cfg(*OFFLOADED, version=version), gpu="H100").stage("weight_sync")
    assert _part(sync, "actor shard reloaded") == (pytest.approx(shard, rel=0.01) if reloaded else 0.0)


def test_vllm_without_wake_up_tags_restores_the_kv_cache_during_the_sync():
    # verl 0.3 pins vllm <= 0.8.2; wake_up(tags=...) arrived with vLLM PR #15500 (0.8.3): weights and KV
    # come back together
    old = estimate_memory(cfg(*OFFLOADED, version="0.3.0.post1"), gpu="H100")
    new = estimate_memory(cfg(*OFFLOADED, version="0.4.1"), gpu="H100")
    kv = _part(old.stage("generate"), "KV cache")
    assert kv > 0
    assert _part(old.stage("weight_sync"), "KV cache restored") == pytest.approx(kv, rel=1e-6)
    assert _part(new.stage("weight_sync"), "KV cache restored") == 0.0


@pytest.mark.parametrize(("version", "staged", "restored"), [
    ("0.4.1", False, True), ("0.6.1", False, True), ("0.6.1", True, False), ("0.7.1", False, False),
    ("0.9.1", False, False)])
def test_sglang_restores_its_kv_cache_with_the_weights_unless_staged(version, staged, restored):
    # verl 0.4-0.6's SGLang sharding manager: resume_memory_occupation() without tags unless
    # rollout.multi_stage_wake_up (sharding_manager/fsdp_sglang.py:103-107 @ 0.4.1, 157-161 @ 0.6.1); 0.7.1's
    # rollout_mode and 0.9.1's update_weights resume the weights alone, the KV cache after the actor is offloaded
    c = cfg(*OFFLOADED, "actor_rollout_ref.rollout.name=sglang",
            f"actor_rollout_ref.rollout.multi_stage_wake_up={staged}", version=version)
    est = estimate_memory(c, gpu="H100")
    kv = _part(est.stage("generate"), "KV cache")
    assert kv > 0
    assert _part(est.stage("weight_sync"), "KV cache restored") == (pytest.approx(kv, rel=1e-6) if restored else 0.0)


def test_vlm_image_tokens_count_against_the_prompt_and_are_asked_for():
    # verl counts a prompt's expanded image tokens against max_prompt_length (utils/dataset/rl_dataset.py:
    # 206-244 @ 0.9.1): 103 gsm8k prompt tokens + 300 image tokens (under 512) + 270 response = 673 per sequence
    c = cfg("actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct")
    with_images = estimate_memory(c, gpu="H100", image_tokens=300)
    labels = [label for _c, label, _g in with_images.stage("actor_update").details]
    assert any(f"{8 * 673:,} tokens per micro batch" in label for label in labels)
    capped = estimate_memory(c, gpu="H100", image_tokens=5000)  # the prompt is capped at max_prompt_length
    labels = [label for _c, label, _g in capped.stage("actor_update").details]
    assert any(f"{8 * (512 + 270):,} tokens per micro batch" in label for label in labels)
    plain = estimate_memory(c, gpu="H100")
    assert any("vision-language model" in a and "--image-tokens" in a for a in plain.assumptions)
    assert not any("vision-language model" in a for a in with_images.assumptions)


def test_a_start_up_check_short_by_less_than_the_margin_is_not_called_a_failure():
    # param-offloaded: 1.5 GiB of context is there when vLLM starts, so 78.15 GiB are free; 0.985 x 79.65 =
    # 78.45 GiB requested: 0.3 GiB short, inside the 1 GiB spread of the context term. It is not "cannot
    # start"; the phase is still oom because 3.6 GiB must sit beside a pool that leaves 1.2 GiB.
    g = _generate(*OFFLOADED, "actor_rollout_ref.rollout.gpu_memory_utilization=0.985")
    assert g.reason is None
    assert "start-up check" in g.basis
    assert g.risk == "oom"
    # 2 GiB short is a failure the arithmetic shows
    g = _generate("actor_rollout_ref.rollout.gpu_memory_utilization=0.97")
    assert g.reason and g.reason.startswith("vllm cannot start")


def test_unknown_lengths_make_a_phase_unknown_only_where_they_decide_its_risk():
    # an unknown dataset: the shortest lengths allowed are 1 token per sequence, the longest 512 + 1024. A
    # micro batch of 64 x 1536 tokens of a 7B actor with entropy in the loss (0.9.1: 6 B per logit) is over the
    # card at max length (64 x 1536 x 152064 x 6 B = 83 GiB of logits alone) and far under it at 1 token.
    big = ["data.train_batch_size=512", "actor_rollout_ref.actor.ppo_mini_batch_size=512",
           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64",  # 64 responses per GPU per micro batch
           "actor_rollout_ref.actor.entropy_coeff=0.01"]
    c = cfg("data.train_files=/data/mystery/train.parquet", *big)
    upd = estimate_memory(c, gpu="H100").stage("actor_update")
    assert 64 * 1536 * 152064 * 6 / GIB > H100_GIB
    assert upd.risk == "unknown" and "--sequence-tokens" in upd.missing and "oom with every sequence" in upd.missing
    # the same config at given lengths is judged on them
    given = estimate_memory(c, gpu="H100", sequence_tokens=1536).stage("actor_update")
    assert given.risk == "oom"
    # a phase that fits even at max length keeps its verdict (8 x 1536 tokens: 14 GiB of logits)
    small = estimate_memory(cfg("data.train_files=/data/mystery/train.parquet"), gpu="H100").stage("actor_update")
    assert small.risk == "ok"
    # without remove_padding every sequence is padded to the maximum whatever the data: the verdict stands
    padded = estimate_memory(cfg("data.train_files=/data/mystery/train.parquet", *big,
                                 "actor_rollout_ref.model.use_remove_padding=False"), gpu="H100")
    assert padded.stage("actor_update").risk == "oom"


def test_a_mix_with_a_known_dataset_is_floored_at_its_lengths():
    # gsm8k (103 + 270 tokens) mixed with an unknown set: a micro batch of gsm8k alone is the floor; when that
    # already cannot fit, the verdict is oom, not unknown
    files = "data.train_files=['/data/gsm8k/train.parquet','/data/mystery/train.parquet']"
    c = cfg(files, "data.train_batch_size=4096", "actor_rollout_ref.actor.ppo_mini_batch_size=4096",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=512", "actor_rollout_ref.actor.entropy_coeff=0.01")
    assert 512 * 373 * 152064 * 6 / GIB > H100_GIB  # logits of the floor alone
    assert estimate_memory(c, gpu="H100").stage("actor_update").risk == "oom"


def test_the_table_says_which_lengths_a_verdict_is_on():
    known = {r["stage"]: r["reason"] for r in estimate_memory(cfg(), gpu="H100").rows()}
    assert "at typical lengths; worst case (every sequence at max length)" in known["actor_update"]
    unknown = {r["stage"]: r["reason"] for r in estimate_memory(
        cfg("data.train_files=/data/mystery/train.parquet"), gpu="H100").rows()}
    assert unknown["actor_update"].endswith("at max length (worst case)")
    assert "worst case" not in unknown["generate"]


@pytest.mark.parametrize(("version", "merge", "stays"), [("0.9.1", False, True), ("0.9.1", True, False),
                                                        ("0.7.1", False, False)])
def test_sglang_keeps_its_weights_through_training_for_a_lora_adapter(version, merge, stays):
    # verl >= 0.8 serves an unmerged LoRA to SGLang as an adapter and releases only the KV cache while training
    # (0.9.1 sglang_rollout.py:202-206 sleep_level 1, release() tags ["kv_cache"]); merged, everything is released.
    # Qwen2.5-7B bf16 over rollout TP 2 plus the rank-32 all-linear adapter: 32 x (2 x (3584 + 3584) q/o +
    # 2 x (3584 + 512) k/v + 3 x (3584 + 18944) MLP) x 28 layers = 80,740,352 parameters.
    c = cfg(*OFFLOADED, "actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.model.lora_rank=32",
            f"actor_rollout_ref.model.lora.merge={merge}", version=version)
    est = estimate_memory(c, gpu="H100")
    engine = _part(est.stage("generate"), "sglang weights")
    kept = _part(est.stage("actor_update"), "sglang weights kept asleep")
    assert kept == (pytest.approx(engine, rel=1e-6) if stays else 0.0)
    assert engine == pytest.approx(2 * (7_615_616_512 + 80_740_352) / 2 / GIB, rel=1e-4)
