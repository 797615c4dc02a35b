"""Every launch script of verl-recipe (fixture copy of 48ea0a7, SOURCE.md) is read and checked.

Exit 2 only for scripts that run no RL training (SFT, generation, evaluation, a checkpoint merge, or no verl
command at all: data preparation, installers, servers) and for scripts broken as written. Each exit 1 is named
here with the verl or recipe source that makes it an error at the verl the script is checked on (the verl its
recipe's REQUIRED_VERL.txt tests it with, when the keys fit it). Known false errors that belong to another
part of the advisor are strict xfails: they must start passing when that part lands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import load_config
from advisor.checks._report import check
from advisor.errors import ConfigError

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_recipe"
ALL = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.sh"))

# script -> what the refusal must say
NOT_RL = {
    "char_count/train_sft.sh": "verl.trainer.sft_trainer",
    "collabllm/train_sft_collabllm.sh": "verl.trainer.fsdp_sft_trainer",
    "open_math_reasoning/run_sft_qwen3_8b.sh": "verl.trainer.sft_trainer",
    "retool/run_qwen2-32b_sft.sh": "verl.trainer.fsdp_sft_trainer",
    "retool/run_qwen2_7b_sft.sh": "verl.trainer.fsdp_sft_trainer",
    "retool/run_qwen2_7b_sft_npu.sh": "verl.trainer.sft_trainer",
    "open_math_reasoning/run_eval.sh": "verl.trainer.main_eval",
    "open_math_reasoning/run_generation.sh": "verl.trainer.main_generation_server",
    "r1/run_r1_distill_qwen.sh": "verl.trainer.main_generation",  # then recipe.r1.main_eval: no training
    "rep_exp/model_merge.sh": "verl.model_merger",
}
NO_VERL_COMMAND = {
    "async_flow/run_ray_cluster.sh": "starts a Ray cluster, then runs another script ($DEFAULT_SH)",
    "dance_grpo/dance_grpo_mindspeed_mm/examples/wan2.2/5B/t2v/get_train_args.sh": "exports training arguments",
    "dapo/prepare_dapo_data.sh": "downloads data",
    "flowrl/prepare/prepare_data.sh": "downloads data",
    "flowrl/prepare/prepare_model.sh": "downloads a model",
    "gkd/megatron/teacher/join_server.sh": "starts the teacher's inference server",
    "gkd/megatron/teacher/start_server.sh": "starts the teacher's inference server",
    "install_verl.sh": "installs verl",
}
BROKEN_AS_WRITTEN = {
    # dance_grpo/dance_grpo_fsdp/main_dance.py is the module; recipe/dance_grpo/ holds no main_dance.py
    "dance_grpo/dance_grpo_fsdp/run_verl_dance.sh": "recipe.dance_grpo.main_dance, which recipe dance_grpo does not",
}

_SYNC = ("rollout mode 'sync': RolloutConfig.__post_init__ raises (verl @ bcb6386 verl/workers/config/rollout.py:"
         "292-296, the verl the recipe's REQUIRED_VERL.txt pins; v0.7.0 rollout.py:244-248)")
# script -> (finding ids that must be among its errors, why each is a true error). prime's scripts are read as
# verl 0.7.0, whose recipe/prime config knows reward_model.micro_batch_size_per_gpu and model.input_tokenizer,
# which verl-recipe's prime config on 0.7.1+ does not: no error (the verl its REQUIRED_VERL.txt pins is not
# forced on keys that fit only an older release)
ERRORS = {
    "dapo/test_dapo_8b_megatron_fp8train.sh": ({"L004"}, "rollout_mode=sync (line 15); " + _SYNC),
    "dapo/test_dapo_dspk_671b_megatron_96gb.sh": ({"L011"}, "template placeholders <path_to_...> in overrides"),
    "dynamo/smoke_dynamo_v1.sh": ({"B003"}, "no actor ppo_micro_batch_size(_per_gpu) with dynamic bsz off: "
                                  "verl/utils/config.py validate_config, run by verl.trainer.main_ppo.run_ppo "
                                  "(dynamo/main_dynamo.py:19,40)"),
    "entropy/32b_clip_cov.sh": ({"L001", "L004"}, "clip_cov_* set on actor, but entropy/config/entropy_trainer.yaml:"
                                "33-37 and verl's PolicyLossConfig keep them under actor.policy_loss (Hydra refuses "
                                "a key not in the config); rollout.mode=sync: " + _SYNC),
    "entropy/32b_kl_cov.sh": ({"L001", "L004"}, "actor.loss_mode is actor.policy_loss.loss_mode "
                              "(entropy_trainer.yaml:34); " + _SYNC),
    "entropy/32b_kl_cov_mininbsz.sh": ({"B006", "L004"}, "micro batch 8 does not divide 128 responses / 32 ranks = 4 "
                                       "(fsdp_workers.py asserts); " + _SYNC),
    "entropy/7b_clip_cov.sh": ({"L004"}, _SYNC),
    "entropy/7b_kl_cov.sh": ({"L004"}, _SYNC),
    # gkd's workers subclass verl's megatron ActorRolloutRefWorker (gkd/megatron/megatron_workers.py:621), whose
    # _build_rollout builds RolloutConfig; gkd/megatron/config/on_policy_distill_trainer.yaml:184 sets mode: sync
    "gkd/megatron/run_moonlight_dsv3_training.sh": ({"L004"}, _SYNC),
    "gkd/megatron/test_qwen.sh": ({"L004"}, _SYNC),
    "gkd/megatron/test_qwen_sglang.sh": ({"L004"}, _SYNC),
    "reward_queue/train_async.sh": ({"B003", "L001", "R001"}, "rollout.test_freq: reward_queue/config/"
                                    "fully_async.yaml:35 'rollout:' has no test_freq (Hydra refuses); no "
                                    "actor_rollout_ref.rollout.name, which verl 0.8.0 (REQUIRED_VERL.txt) leaves "
                                    "'???'; no actor micro batch (validate_config via run_ppo, main.py:129)"),
    # spo pins verl d7944c0 (2025-10-28): its vLLM rollout raises when chunked prefill is on and
    # max_num_batched_tokens < max_model_len (verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py:185-188)
    "spo/estimate_offline_values/eval.sh": ({"R006"}, "max_num_batched_tokens 8192 < max_model_len 10240"),
    "spo/train.sh": ({"R006"}, "max_num_batched_tokens 8192 < max_model_len 10240"),
}
# false errors another part of the advisor owns (values the script's caller supplies: its arguments $1, $2, ...
# and an `if` on them, which the reader cannot evaluate); strict: they fail once that part makes them pass
# Scripts the advisor still gets wrong (strict xfails: they must start passing when that part lands). The
# rep_exp scripts, whose sizes come from their own arguments ($1..$3), pass since a value built from a variable
# the script leaves unknown is a warning (L008), not an error.
KNOWN_FALSE: dict[str, str] = {}


def test_every_script_is_listed_once() -> None:
    assert len(ALL) == 116
    lists = [NOT_RL, NO_VERL_COMMAND, BROKEN_AS_WRITTEN, ERRORS, KNOWN_FALSE]
    named = [name for table in lists for name in table]
    assert len(named) == len(set(named)) and set(named) <= set(ALL)


PARAMS = [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FALSE[n])) if n in KNOWN_FALSE else n
          for n in ALL]


@pytest.mark.parametrize("name", PARAMS)
def test_every_recipe_script_is_read_and_checked(name: str) -> None:
    script = CORPUS / name
    if name in NOT_RL or name in NO_VERL_COMMAND or name in BROKEN_AS_WRITTEN:
        expected = NOT_RL.get(name) or BROKEN_AS_WRITTEN.get(name) or "no verl command found"
        with pytest.raises(ConfigError, match=expected) as info:
            load_config(script)
        assert "\n" not in str(info.value)
        if name in NOT_RL:
            assert "not RL training" in str(info.value)
        return
    report = check(load_config(script))
    errors = list(report.errors)
    if name in ERRORS:
        ids, why = ERRORS[name]
        assert ids <= {f.id for f in errors}, why
        assert report.exit_code == 1
    else:
        assert not errors, [f"{f.id} {f.message}" for f in errors]
        assert report.exit_code == 0


def test_plus_on_a_key_a_later_verl_added_reads_as_the_verl_before() -> None:
    # '+algorithm.filter_groups.*': Hydra refuses '+' on a key the base has (hydra/_internal/config_loader_impl.py
    # _apply_overrides_to_config); the key is in verl's core config from 0.9.0
    # (0.9.0 verl/trainer/config/_generated_ppo_megatron_trainer.yaml:895), so the script fits 0.8.0
    script = CORPUS / "low_precision/run_dapo_asyncrl_qwen3_moe_30b_fp8rollout.sh"
    assert load_config(script).version == "0.8.0"
    assert "L006" in {f.id for f in check(load_config(script, verl_version="0.9.0")).errors}
