"""Every validation rule: a config that breaks it, one that passes, and a fix that itself validates.

The expected outcome of each case comes from the verl rule the check mirrors (named in the check's
source), written out here as arithmetic on the case's numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor import load_config
from advisor.checks import CHECKS, run_checks

A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"
VERL_SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts"

# A clean GAE/PPO baseline on 8 GPUs: B=256 prompts, n=4 -> 1024 responses, M=64 -> 256 responses per
# optimizer step -> 32 per GPU, micro 8 -> 4 accumulation steps.
BASE = [
    f"{R}.name=vllm", "data.train_batch_size=256", f"{R}.n=4", f"{A}.ppo_mini_batch_size=64",
    f"{A}.ppo_micro_batch_size_per_gpu=8", f"{R}.log_prob_micro_batch_size_per_gpu=16",
    f"{REF}.log_prob_micro_batch_size_per_gpu=16", "critic.ppo_micro_batch_size_per_gpu=8",
    "data.filter_overlong_prompts=true", "trainer.n_gpus_per_node=8", "trainer.nnodes=1",
]
GRPO = ["algorithm.adv_estimator=grpo", f"{A}.use_kl_loss=true"]


def findings(overrides: list[str], version: str = "main", model: object | None = None):
    megatron = f"{A}.strategy=megatron" in overrides
    cfg = load_config(None, [*BASE, *overrides], verl_version=version,
                      config_name="ppo_megatron_trainer" if megatron else "ppo_trainer")
    return cfg, run_checks(cfg, model=model)


def fired(overrides: list[str], check_id: str, **kw) -> bool:
    return any(f.id == check_id for f in findings(overrides, **kw)[1])


def test_baseline_is_clean() -> None:
    _, found = findings([])
    assert [f for f in found if f.severity != "info"] == []
    _, found = findings(GRPO)
    assert [f for f in found if f.severity != "info"] == []


QWEN_LIKE = SimpleNamespace(num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768)

CASES = [
    # id, breaks it, passes (each applied on BASE); the comment gives verl's rule on these numbers
    ("B001", ["data.train_batch_size=250"], ["data.train_batch_size=248"]),  # 250*4 % 8 = 0? 1000%8=0 ->
    ("B001", [f"{R}.n=3", "data.train_batch_size=250", f"{A}.ppo_mini_batch_size=50"],
     [f"{R}.n=4", "data.train_batch_size=250", f"{A}.ppo_mini_batch_size=50"]),  # 750 % 8 != 0; 1000 % 8 == 0
    ("B002", [f"{A}.ppo_mini_batch_size=512"], [f"{A}.ppo_mini_batch_size=256"]),  # M > B=256
    ("B003", [f"{A}.ppo_micro_batch_size_per_gpu=null"], []),  # neither actor micro key
    ("B003", [f"{A}.ppo_micro_batch_size=64"], [f"{A}.ppo_micro_batch_size=64",
                                                f"{A}.ppo_micro_batch_size_per_gpu=null"]),  # both set
    ("B003", [f"{R}.log_prob_micro_batch_size_per_gpu=null"], []),
    ("B003", [*GRPO, f"{REF}.log_prob_micro_batch_size_per_gpu=null"],
     [f"{REF}.log_prob_micro_batch_size_per_gpu=null"]),  # ref checked only when a ref model is used
    ("B003", ["critic.ppo_micro_batch_size_per_gpu=null"], ["critic.ppo_micro_batch_size_per_gpu=null", *GRPO]),
    ("B004", [f"{A}.ppo_micro_batch_size=4", f"{A}.ppo_micro_batch_size_per_gpu=null"],  # 4 * sp 1 < 8 GPUs
     [f"{A}.ppo_micro_batch_size=16", f"{A}.ppo_micro_batch_size_per_gpu=null"]),
    ("B004", [f"{A}.ppo_micro_batch_size=24", f"{A}.ppo_micro_batch_size_per_gpu=null"],  # 64 % 24 != 0
     [f"{A}.ppo_micro_batch_size=32", f"{A}.ppo_micro_batch_size_per_gpu=null"]),
    ("B005", ["trainer.nnodes=16", f"{A}.ppo_mini_batch_size=16", "data.train_batch_size=512",
              f"{A}.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1"],  # 16*4 // 128 = 0
     ["trainer.nnodes=16", f"{A}.ppo_mini_batch_size=32", "data.train_batch_size=512",
      f"{A}.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1"]),  # 32*4 // 128 = 1
    ("B006", [f"{A}.ppo_micro_batch_size_per_gpu=12"], [f"{A}.ppo_micro_batch_size_per_gpu=16"]),  # 32 % 12
    ("B006", ["critic.ppo_micro_batch_size_per_gpu=5"], ["critic.ppo_micro_batch_size_per_gpu=4"]),
    ("B007", [f"{A}.use_dynamic_bsz=true", "data.train_batch_size=250", f"{R}.n=3", f"{A}.ppo_mini_batch_size=50"],
     [f"{A}.use_dynamic_bsz=true", "data.train_batch_size=248", f"{R}.n=3", f"{A}.ppo_mini_batch_size=62"]),
    ("B008", ["--v071", "trainer.n_gpus_per_node=4", "data.train_batch_size=250", f"{R}.n=2",  # legacy trainer
              f"{A}.ppo_mini_batch_size=50", f"{A}.ppo_micro_batch_size_per_gpu=5",
              "critic.ppo_micro_batch_size_per_gpu=5"],  # 500 % 8 workers
     ["--v071", "trainer.n_gpus_per_node=4", "data.train_batch_size=252", f"{R}.n=2", f"{A}.ppo_mini_batch_size=42",
      f"{A}.ppo_micro_batch_size_per_gpu=3", "critic.ppo_micro_batch_size_per_gpu=3"]),
    ("B009", [f"{A}.use_dynamic_bsz=true", f"{A}.ppo_max_token_len_per_gpu=1000"],  # < 512 + 512 = 1024
     [f"{A}.use_dynamic_bsz=true", f"{A}.ppo_max_token_len_per_gpu=1024"]),
    ("B010", ["--megatron", f"{A}.megatron.tensor_model_parallel_size=3"],
     ["--megatron", f"{A}.megatron.tensor_model_parallel_size=2"]),
    ("B101", ["data.train_batch_size=224"], ["data.train_batch_size=192"]),  # 224 % 64 = 32; 192 % 64 = 0
    ("B011", ["data.gen_batch_size=96"], ["data.gen_batch_size=128"]),  # 256 % 96 = 64; 256 % 128 = 0
    ("B012", [f"{A}.ppo_micro_batch_size_per_gpu=0"], [f"{A}.ppo_micro_batch_size_per_gpu=1"]),  # fsdp_workers.py:263
    ("B012", [f"{R}.n=0"], [f"{R}.n=1"]),  # 0 responses per prompt: a mini-batch of 0 (fsdp_workers.py:251)
    # vLLM serves LoRA ranks up to 512 (verl/workers/rollout/vllm_rollout/utils.py:94)
    ("R008", ["actor_rollout_ref.model.lora_rank=1024"], ["actor_rollout_ref.model.lora_rank=512"]),
    ("A015", ["--megatron", f"{A}.megatron.router_replay.mode=R2", "algorithm.rollout_correction.bypass_mode=true"],
     ["--megatron", f"{A}.megatron.router_replay.mode=R2", "algorithm.rollout_correction.bypass_mode=false"]),
    ("B102", ["--v071", f"{A}.ppo_mini_batch_size=62", "data.train_batch_size=248",  # legacy workers only
              f"{A}.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1"],  # 62*4 = 248 over 8
     ["--v071", f"{A}.ppo_mini_batch_size=62", "data.train_batch_size=248"]),
    ("B103", ["--v071", "data.train_batch_size=64"], []),  # B == M, one epoch; legacy actor's shortcut only
    ("B104", [f"{A}.use_dynamic_bsz=true", f"{A}.ppo_max_token_len_per_gpu=1500"],  # 1024 <= 1500 < 2048
     [f"{A}.use_dynamic_bsz=true", f"{A}.ppo_max_token_len_per_gpu=2048"]),
    ("R001", [f"{R}.name=???"], []),
    ("R002", [f"{R}.tensor_model_parallel_size=3"], [f"{R}.tensor_model_parallel_size=4"]),  # 8 % 3
    ("R003", [f"{R}.expert_parallel_size=4", f"{R}.tensor_model_parallel_size=2"],
     [f"{R}.expert_parallel_size=2", f"{R}.tensor_model_parallel_size=2"]),
    ("R004", [f"{R}.pipeline_model_parallel_size=2"], [f"{R}.pipeline_model_parallel_size=1"]),
    ("R005", ["--model", f"{R}.tensor_model_parallel_size=8"], ["--model", f"{R}.tensor_model_parallel_size=4"]),
    # verl <= 0.6.1 refuses chunked prefill with a token budget below max_model_len (or P+R = 1024)
    ("R006", ["--v061", f"{R}.max_num_batched_tokens=1000"], ["--v061", f"{R}.max_num_batched_tokens=1024"]),
    ("R006", ["--v061", f"{R}.max_num_batched_tokens=1000", f"{R}.max_model_len=2048"],
     [f"{R}.max_num_batched_tokens=1000", f"{R}.max_model_len=2048"]),  # 0.7.0+: vLLM V1 chunks long prefills
    ("R101", [f"{R}.max_model_len=1000"], [f"{R}.max_model_len=1024"]),  # P+R = 1024
    ("R102", [f"{R}.max_num_batched_tokens=1000"], [f"{R}.max_num_batched_tokens=1024"]),
    ("R103", [f"{R}.val_kwargs.do_sample=true", f"{R}.val_kwargs.temperature=0"],
     [f"{R}.val_kwargs.do_sample=true", f"{R}.val_kwargs.temperature=0.6"]),
    # 512 x 4 = 2048 responses over 8 GPUs / rollout TP 2 = 4 replicas: 512 each, over 0.9's default 256
    # (rollout.yaml:84 in 0.9.1; 1024 in 0.8.0); a value the user set, even 256, is their choice
    ("R104", ["data.train_batch_size=512"], ["data.train_batch_size=512", f"{R}.max_num_seqs=256"]),
    ("R104", ["data.train_batch_size=512"], ["data.train_batch_size=512", "--v071"]),
    # verl 0.9 main_ppo no longer migrates the legacy top-level reward keys (read_keys.yaml); 0.7.1 still does
    ("W014", ["custom_reward_function.path=/r.py"], ["reward.custom_reward_function.path=/r.py"]),
    ("W014", ["custom_reward_function.path=/r.py"], ["custom_reward_function.path=/r.py", "--v071"]),
    # from 0.8.0 the FSDP engine compiles by actor.fsdp_config.use_torch_compile (fsdp/transformer_impl.py:185)
    ("W014", [f"{A}.use_torch_compile=false"], [f"{A}.fsdp_config.use_torch_compile=false"]),
    ("A001", [f"{A}.loss_agg_mode=token_mean"], [f"{A}.loss_agg_mode=seq-mean-token-sum-norm"]),
    ("A001", [f"{A}.loss_agg_mode=sum-everything"], [f"{A}.loss_agg_mode=token-mean"]),
    ("A002", [f"{A}.optim.lr_scheduler_type=linear"], [f"{A}.optim.lr_scheduler_type=cosine"]),
    ("A003", [f"{A}.clip_ratio_c=1.0"], [f"{A}.clip_ratio_c=1.5"]),
    ("A004", ["algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.horizon=0"],
     ["algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.type=adaptive"]),
    ("A005", [*GRPO, f"{A}.kl_loss_type=full"], [*GRPO, f"{A}.kl_loss_type=k3+"]),
    ("A006", [f"{A}.strategy=deepspeed"], [f"{A}.strategy=fsdp2"]),
    ("A007", [f"{A}.ulysses_sequence_parallel_size=2", "actor_rollout_ref.model.use_remove_padding=false",
              f"{A}.ppo_micro_batch_size_per_gpu=4", "critic.ppo_micro_batch_size_per_gpu=4"],
     [f"{A}.ulysses_sequence_parallel_size=2", f"{A}.ppo_micro_batch_size_per_gpu=4"]),
    ("A008", ["--model", f"{A}.ulysses_sequence_parallel_size=8", f"{A}.ppo_micro_batch_size_per_gpu=16",
              "critic.ppo_micro_batch_size_per_gpu=16"],  # 28 heads % 8 != 0
     ["--model", f"{A}.ulysses_sequence_parallel_size=4", f"{A}.ppo_micro_batch_size_per_gpu=16",
      "critic.ppo_micro_batch_size_per_gpu=16"]),  # 28 % 4 == 0, 4 % 4 == 0
    ("A009", [f"{R}.val_kwargs.do_sample=true", f"{R}.temperature=0", f"{R}.val_kwargs.temperature=1.0"],
     [f"{R}.val_kwargs.do_sample=true", f"{R}.temperature=0.7", f"{R}.val_kwargs.temperature=1.0"]),
    ("A010", ["algorithm.adv_estimator=my_estimator"], ["algorithm.adv_estimator=rloo"]),
    ("A010", ["algorithm.adv_estimator=grpoo"], ["algorithm.adv_estimator=grpo"]),
    ("A014", [f"{A}.policy_loss.loss_mode=gspoo"], [f"{A}.policy_loss.loss_mode=gspo"]),
    ("R007", [f"{R}.name=vlm"], [f"{R}.name=sglang"]),
    ("A011", [f"{A}.optim.lr_warmup_steps=null"], [f"{A}.optim.lr_warmup_steps=0"]),
    # the Megatron config has no such key; only a forced '++' gets it to the Megatron actor's assert
    # the legacy Megatron actor asserts it (0.7.1 verl/workers/actor/megatron_actor.py:193); 0.8.0 removed that actor
    ("A012", ["--megatron", "--v071", f"++{A}.ulysses_sequence_parallel_size=2"], ["--megatron", "--v071"]),
    ("A013", ["+reward_model.overlong_buffer.enable=true", "+reward_model.overlong_buffer.len=600"],
     ["+reward_model.overlong_buffer.enable=true", "+reward_model.overlong_buffer.len=128"]),
    ("W001", [*GRPO, f"{R}.n=1", "data.train_batch_size=256", f"{A}.ppo_mini_batch_size=64",
              f"{A}.ppo_micro_batch_size_per_gpu=8"], [*GRPO]),
    ("W002", ["critic.enable=false"], ["critic.enable=true"]),
    ("W003", [*GRPO, "critic.enable=true"], [*GRPO]),
    ("W004", ["algorithm.use_kl_in_reward=true", f"{A}.use_kl_loss=true"], ["algorithm.use_kl_in_reward=true"]),
    ("W005", [f"{A}.optim.lr=1e-3"], [f"{A}.optim.lr=1e-5"]),
    ("W005", ["actor_rollout_ref.model.lora_rank=32", f"{A}.optim.lr=1e-2"],
     ["actor_rollout_ref.model.lora_rank=32", f"{A}.optim.lr=3e-5"]),
    ("W006", ["data.filter_overlong_prompts=false"], []),
    ("W007", ["actor_rollout_ref.model.path=deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"],
     ["actor_rollout_ref.model.path=deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "data.max_response_length=4096"]),
    ("W008", ["--v071", f"{A}.optim.clip_grad=0.5"], ["--v071", f"{A}.optim.clip_grad=0.5", f"{A}.grad_clip=0.5"]),
    ("W009", [f"{A}.optim.lr_warmup_steps=0", f"{A}.optim.lr_warmup_steps_ratio=0.1"],
     [f"{A}.optim.lr_warmup_steps=-1", f"{A}.optim.lr_warmup_steps_ratio=0.1"]),
    ("W010", [f"{A}.kl_loss_coef=0.1"], [*GRPO, f"{A}.kl_loss_coef=0.1"]),
    # ppo_lora.rst:164: LoRA needs about ten times the full-fine-tuning lr (1e-6 in verl's examples)
    ("W011", ["actor_rollout_ref.model.lora_rank=32", f"{A}.optim.lr=1e-6"],
     ["actor_rollout_ref.model.lora_rank=32", f"{A}.optim.lr=3e-5"]),
    ("W011", ["actor_rollout_ref.model.lora_rank=32", f"{A}.optim.lr=3e-6"], [f"{A}.optim.lr=1e-6"]),  # full FT
    ("W012", [f"{A}.clip_ratio_low=0.28", f"{A}.clip_ratio_high=0.2"],
     [f"{A}.clip_ratio_low=0.2", f"{A}.clip_ratio_high=0.28"]),
    ("W012", [f"{A}.clip_ratio=0.3", f"{A}.clip_ratio_high=0.2", f"{A}.clip_ratio_low=null"],
     [f"{A}.clip_ratio=0.2", f"{A}.clip_ratio_high=0.28", f"{A}.clip_ratio_low=null"]),  # low falls back to 0.3
    ("W013", [*GRPO, f"{R}.temperature=0.3"], [*GRPO, f"{R}.temperature=1.0"]),
    ("W013", [*GRPO, f"{R}.temperature=0.3"], [f"{R}.temperature=0.3"]),  # GAE: no group to compare
]


def _prepare(overrides: list[str]) -> tuple[list[str], str, object | None]:
    model = QWEN_LIKE if "--model" in overrides else None
    megatron = "--megatron" in overrides
    version = "0.6.1" if "--v061" in overrides else "0.7.1" if "--v071" in overrides else "main"
    rest = [o for o in overrides if not o.startswith("--")]
    if megatron:
        rest = [f"{A}.strategy=megatron", *rest]
    return rest, version, model


@pytest.mark.parametrize("check_id, breaks, passes", [pytest.param(*c, id=f"{c[0]}-{i}") for i, c in
                                                     enumerate(CASES)])
def test_rule_fires_on_breaking_config_and_not_on_passing(check_id: str, breaks: list[str],
                                                          passes: list[str]) -> None:
    b, version, model = _prepare(breaks)
    p, version_p, model_p = _prepare(passes)
    if check_id == "B001" and breaks == ["data.train_batch_size=250"]:
        pytest.skip("250 x 4 = 1000 is divisible by 8: not a breaking case")  # kept to document the arithmetic
    if check_id == "B102":
        assert not fired(b, "B102", version="main")  # verl 0.8 removed the legacy workers it mirrors
        # 62 x 4 = 248 responses over 8 ranks = 31 each: divisible, so B102 must stay quiet here ...
        assert not fired(b, "B102", version=version)
        # ... and with n = 3, 62 x 3 = 186 responses over 8 ranks floors to 23 x 8 = 184
        b = [*b, f"{R}.n=3", "data.train_batch_size=248"]
    assert fired(b, check_id, version=version, model=model), f"{check_id} should fire on {b}"
    assert not fired(p, check_id, version=version_p, model=model_p), f"{check_id} should not fire on {p}"


@pytest.mark.parametrize("check_id, breaks, passes", [pytest.param(*c, id=f"{c[0]}-{i}") for i, c in
                                                     enumerate(CASES)])
def test_proposed_fix_validates(check_id: str, breaks: list[str], passes: list[str]) -> None:
    b, version, model = _prepare(breaks)
    cfg, found = findings(b, version=version, model=model)
    target = [f for f in found if f.id == check_id and f.fix]
    for finding in target:
        patched = cfg.with_changes(finding.fix)
        after = run_checks(patched, model=model, verify_fixes=False)
        assert not any(f.id == check_id and f.keys == finding.keys for f in after), finding.fix
        before_errors = {(f.id, f.keys) for f in found if f.severity == "error"}
        assert all((f.id, f.keys) in before_errors for f in after if f.severity == "error")
        assert len(finding.fix) <= 2


def test_every_check_has_a_case_and_a_source() -> None:
    covered = {c[0] for c in CASES}
    for chk in CHECKS:
        assert chk.id in covered, f"{chk.id} has no test case"
        assert chk.source, f"{chk.id} names no source"


@settings(max_examples=60, deadline=None)
@given(B=st.integers(1, 300), n=st.integers(1, 8), gpus=st.sampled_from([1, 2, 4, 8, 16]))
def test_b001_is_verls_divisibility_rule(B: int, n: int, gpus: int) -> None:
    # verl/utils/config.py:109-113: assert (train_batch_size * n) % n_gpus == 0 (FSDP, no dynamic bsz)
    overrides = [f"data.train_batch_size={B}", f"{R}.n={n}", f"trainer.n_gpus_per_node={gpus}",
                 f"{A}.ppo_mini_batch_size={B}"]
    assert fired(overrides, "B001") == ((B * n) % gpus != 0)


@settings(max_examples=60, deadline=None)
@given(M=st.integers(1, 64), n=st.integers(1, 8), u=st.integers(1, 16))
def test_b006_is_verls_micro_batch_rule(M: int, n: int, u: int) -> None:
    # fsdp_workers.py:241-262: mini' = M*n // dp; assert mini' % u == 0 (only when mini' > 0)
    dp = 8
    overrides = [f"data.train_batch_size={M * 8}", f"{A}.ppo_mini_batch_size={M}", f"{R}.n={n}",
                 f"{A}.ppo_micro_batch_size_per_gpu={u}", "algorithm.adv_estimator=grpo"]  # no critic
    mini = M * n // dp
    assert fired(overrides, "B006") == (mini > 0 and mini % u != 0)


@pytest.mark.parametrize("version", ["0.4.1", "0.5.0", "0.6.1", "0.9.1", "main"])
def test_a007_reads_the_remove_padding_flag_verl_asserts_on(version: str) -> None:
    # verl asserts on model.use_remove_padding: v0.4.1 ray_trainer.py:461-467; from 0.6
    # FSDPActorConfig.validate(model_config) (0.6.1 actor.py:244-249, 0.9.1 :331-341), whatever the actor's flag
    sp = [f"{A}.ulysses_sequence_parallel_size=2"]
    assert not fired([*sp, "actor_rollout_ref.model.use_remove_padding=true"], "A007", version=version)
    assert fired([*sp, "actor_rollout_ref.model.use_remove_padding=false"], "A007", version=version)
    if version not in ("0.4.1", "0.5.0"):  # the actor has its own flag from 0.6
        assert fired([*sp, "actor_rollout_ref.model.use_remove_padding=false", f"{A}.use_remove_padding=true"],
                     "A007", version=version)


def test_verls_own_tuning_scripts_pass_the_checks_of_their_version() -> None:
    # verl's device-tuning scripts ran on the GPUs they name (their comments record the runs), with
    # verl 0.4.1 (tests/advisor_tests/memory/validation_set.yaml says why): none may be rejected.
    scripts = sorted((VERL_SCRIPTS / "examples" / "tuning").rglob("*.sh"))
    assert len(scripts) >= 10
    for script in scripts:
        cfg = load_config(script, verl_version="0.4.1")
        errors = [f"{f.id}: {f.message}" for f in [*cfg.findings, *run_checks(cfg)] if f.severity == "error"]
        assert errors == [], f"{script.name}: {errors}"


@pytest.mark.parametrize(("override", "meant"), [
    ("algorithm.adv_estimator=grpoo", "grpo"), (f"{A}.loss_agg_mode=token_mean", "token-mean"),
    (f"{A}.policy_loss.loss_mode=gspoo", "gspo"), (f"{R}.name=vlm", "vllm"),
])
def test_a_misspelt_enumerated_value_is_an_error_with_did_you_mean(override: str, meant: str) -> None:
    key = override.split("=", 1)[0]
    found = [f for f in findings([*GRPO, override])[1] if f.keys[:1] == (key,)]
    assert len(found) == 1 and found[0].severity == "error"
    assert f"did you mean '{meant}'" in found[0].message
    assert [(c.key, c.new) for c in found[0].fix] == [(key, meant)]


def test_a_value_far_from_every_known_one_may_be_a_custom_registration() -> None:
    (finding,) = [f for f in findings(["algorithm.adv_estimator=my_estimator"])[1] if f.id == "A010"]
    assert finding.severity == "warning" and "register_adv_est" in finding.message and not finding.fix


# --- rules per version and trainer --------------------------------------------------------------------------


def _finding(overrides: list[str], check_id: str, version: str):
    return next((f for f in findings(overrides, version=version)[1] if f.id == check_id), None)


@pytest.mark.parametrize("B, M, n, gpus", [(224, 64, 4, 8), (250, 64, 5, 8), (100, 24, 3, 4)])
def test_v1_trainer_pads_a_batch_that_does_not_divide_and_says_how_much(B: int, M: int, n: int, gpus: int) -> None:
    over = [f"data.train_batch_size={B}", f"{A}.ppo_mini_batch_size={M}", f"{R}.n={n}",
            f"trainer.n_gpus_per_node={gpus}", f"{A}.ppo_micro_batch_size_per_gpu=1",
            "critic.ppo_micro_batch_size_per_gpu=1"]
    # 0.9.1 trainer_base.py:1589-1621: pad B*n up to a multiple of lcm(dp, M*n [actor], M*n [critic])
    multiple = math.lcm(gpus, M * n)
    padded = -(-B * n // multiple) * multiple
    v1 = _finding(over, "B101", "0.9.1")
    assert v1 is not None and v1.severity == "warning"
    assert f"from {B * n} to {padded} samples" in v1.message
    assert f"{(padded - B * n) / padded:.1%}" in v1.message
    assert "trainer_base.py" in v1.source
    # the legacy trainer hands the engine worker mini_batch_size = M * n (0.9.1 ray_trainer.py:1352-1363), whose
    # make_iterator asserts it divides each rank's share (0.9.1 verl/utils/tensordict_utils.py:588)
    legacy = _finding([*over, "trainer.use_v1=false"], "B101", "0.9.1")
    assert legacy is not None and legacy.severity == "error" and "asserts" in legacy.message
    assert "pads" not in legacy.message and "tensordict_utils.py" in legacy.source
    assert _finding(over, "B101", "0.8.0").severity == "error"  # 0.8.0 has only the legacy trainer, on engine workers
    short = _finding(over, "B101", "0.7.1")  # the legacy actor of 0.7 runs a short, under-weighted last mini-batch
    assert short.severity == "warning" and "last of" in short.message


def test_dynamic_batch_not_splitting_over_ranks_is_padding_on_v1_and_an_error_before() -> None:
    over = ["data.train_batch_size=250", f"{R}.n=3", f"{A}.ppo_mini_batch_size=250", f"{A}.use_dynamic_bsz=true",
            "critic.use_dynamic_bsz=true"]  # 750 responses over 8 ranks
    assert _finding(over, "B007", "0.8.0").severity == "error"  # DataProto.chunk fails
    v1 = _finding(over, "B007", "0.9.1")
    assert v1.severity == "warning" and "from 750 to" in v1.message


def test_engine_workers_assert_an_even_mini_batch_split_from_0_8() -> None:
    # 62 x 3 = 186 responses over 8 ranks: the legacy worker floors (B102), the engine worker asserts
    # (0.8.0 verl/workers/engine_workers.py:258-261: mini_batch_size % dp == 0)
    over = [f"{A}.ppo_mini_batch_size=62", "data.train_batch_size=248", f"{R}.n=3",
            f"{A}.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1"]
    for version in ("0.8.0", "0.9.1", "main"):
        found = _finding(over, "B005", version)
        assert found is not None and found.severity == "error" and "engine_workers.py" in found.source, version
        assert _finding(over, "B102", version) is None
    assert _finding(over, "B005", "0.7.1") is None and _finding(over, "B102", "0.7.1") is not None


def test_a_check_limited_to_a_version_range_runs_only_there() -> None:
    from advisor.checks import CHECKS

    w008 = next(c for c in CHECKS if c.id == "W008")
    assert w008.applies_to("0.7.1") and not w008.applies_to("0.8.0") and not w008.applies_to("0.10.0.dev")
    b005 = next(c for c in CHECKS if c.id == "B005")
    assert "engine_workers" in b005.source_for("0.9.1") and "fsdp_workers" in b005.source_for("0.7.1")


def test_old_verl_applies_reward_side_kl_whenever_the_loss_has_none() -> None:
    # verl <= 0.3 has no algorithm.use_kl_in_reward: ray_trainer.py applies the KL penalty to the reward
    # unless actor.use_kl_loss (0.3.0.post1 verl/trainer/ppo/ray_trainer.py:881-883)
    from advisor.facts._batch import kl_in_reward

    assert kl_in_reward(load_config(None, verl_version="0.3.0.post1"))
    assert not kl_in_reward(load_config(None, [f"{A}.use_kl_loss=true"], verl_version="0.3.0.post1"))
    assert not kl_in_reward(load_config(None, verl_version="0.9.1"))  # use_kl_in_reward defaults to false


def test_the_critics_global_micro_batch_is_validated_too() -> None:
    # 0.9.1 verl/workers/config/critic.py:107-116: ppo_mini_batch_size % ppo_micro_batch_size (global) == 0
    over = ["critic.ppo_micro_batch_size_per_gpu=null", "critic.ppo_micro_batch_size=48"]  # 64 % 48 = 16
    found = [f for f in findings(over, version="0.9.1")[1] if f.id == "B004"]
    assert [f.keys for f in found] == [("critic.ppo_micro_batch_size",)] and "critic:" in found[0].message
    assert not [f for f in findings(["critic.ppo_micro_batch_size_per_gpu=null", "critic.ppo_micro_batch_size=32"],
                                    version="0.9.1")[1] if f.id == "B004"]  # 64 % 32 = 0, 32 >= 8 GPUs


def test_agent_workers_need_an_even_split_only_off_the_v1_trainer() -> None:
    # legacy: DataProto.chunk asserts len % chunks == 0 (verl/protocol.py:870-873); V1 chunks a TensorDict and
    # zips with strict=False (0.9.1 verl/trainer/ppo/v1/agent_loop_tq.py:251-256)
    over = ["data.train_batch_size=7", f"{R}.n=2", f"{A}.ppo_mini_batch_size=7", "trainer.n_gpus_per_node=1",
            f"{A}.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1"]  # 14 over 8 workers
    assert _finding(over, "B008", "0.8.0") is not None
    assert _finding(over, "B008", "0.9.1") is None
    assert _finding([*over, "trainer.use_v1=false"], "B008", "0.9.1") is not None


def test_agent_workers_split_a_generation_round_of_gen_batch_size_prompts() -> None:
    # the legacy trainer's dataloader yields data.gen_batch_size prompts (0.7.1 ray_trainer.py:348), repeated n
    # times and chunked over the agent-loop workers (ray_trainer.py:1307-1321): 10 x 2 = 20 over 8 workers fails
    over = ["data.train_batch_size=8", "+data.gen_batch_size=10", f"{R}.n=2", f"{A}.ppo_mini_batch_size=8",
            f"{A}.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1", "trainer.n_gpus_per_node=8"]
    found = _finding(over, "B008", "0.8.0")
    assert found is not None and "data.gen_batch_size × n = 20" in found.message
    assert found.keys[0] == "data.gen_batch_size"
    assert _finding([*over[:1], "+data.gen_batch_size=12", *over[2:]], "B008", "0.8.0") is None  # 24 over 8


def test_rollout_expert_parallel_rule_is_not_trtllms_from_071() -> None:
    """0.7.1+ asserts ep == tp × dp for every engine but TensorRT-LLM (0.9.1 verl/workers/config/rollout.py:294)."""
    over = [f"{R}.expert_parallel_size=4", f"{R}.tensor_model_parallel_size=2"]
    assert _finding(over, "R003", "0.9.1") is not None
    assert _finding([*over, f"{R}.name=trtllm"], "R003", "0.9.1") is None
    assert _finding([*over, f"{R}.name=trtllm"], "R003", "0.7.0") is not None  # 0.7.0 asserts it for every name


def test_fsdp2_is_an_unknown_strategy_before_04() -> None:
    """verl 0.2/0.3 build FSDP or Megatron workers only (0.3.0.post1 verl/trainer/main_ppo.py:95-108)."""
    assert _finding([f"{A}.strategy=fsdp2"], "A006", "0.3.0.post1") is not None
    assert _finding([f"{A}.strategy=fsdp2"], "A006", "0.4.1") is None
