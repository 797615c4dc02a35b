"""Every launch script under verl main's examples/ (tests/fixtures/verl_main, SOURCE.md there) is read.

Exit 2 only for entry points that are not RL training and for scripts that run no verl command; every exit 1
is a true error, listed below with the verl source that makes it one. Everything else checks clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import load_config
from advisor.checks._report import check
from advisor.errors import ConfigError

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_main" / "examples"
ALL = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.sh"))
SFT = {name for name in ALL if name.startswith("sft/")}

NO_VERL_COMMAND = {
    # a stub that prints where the example moved (Megatron-LM's lite branch) and exits 1
    "grpo_trainer/run_deepseek_v4_megatron_lite.sh": "moved to the Megatron Lite launcher",
    "sft/gsm8k/run_deepseek_v4_megatron_lite.sh": "moved to the Megatron Lite launcher",
    # SFT through ENTRYPOINT=${ENTRYPOINT:-"-m verl.trainer.sft_trainer"}: one quoted word the reader does not split
    "sft/gsm8k/run_mimo_7b_mtp_megatron.sh": "SFT entry point in a variable",
}
# script -> words its one line must hold
NOT_RL = {
    "generation/run_deepseek_llm_7b.sh": "main_generation_server",
    **{name: "SFT trainer" for name in SFT if name not in NO_VERL_COMMAND},
}

# script -> (finding ids among the errors, why verl refuses the script as written)
ERRORS = {
    # verl main's rollout.yaml has engine_kwargs.sglang: {}; a new key there needs '+' (Hydra refuses
    # 'sglang.attention_backend=triton'); its keys fit verl 0.5.0 best, where attention_backend was a default,
    # and 0.5.0 lacks ray_kwargs.ray_init.runtime_env.py_executable
    "grpo_trainer/run_gpt_oss_20b_fsdp.sh": ({"L001"}, "engine_kwargs.sglang.attention_backend without '+'"),
    # at its default INFER_BACKEND=vllm: rollout EP 2 != TP 4 x DP 1, which verl asserts for every engine but
    # trtllm (verl main verl/workers/config/rollout.py:292-295); the script works only with INFER_BACKEND=trtllm
    "grpo_trainer/run_qwen3_30b_a3b_megatron.sh": ({"R003"}, "expert_parallel_size != TP x DP on vllm"),
    # 128 prompts, n=1, ppo_mini_batch_size 32 over 8 GPUs: 4 responses per GPU per mini-batch, micro batch 8;
    # the engine asserts the micro batch divides it (0.9.1 verl/workers/engine/utils.py:124-127)
    "rollout_correction/run_qwen2_5_7b_fsdp.sh": ({"B006"}, "micro batch 8 over a 4-response mini-batch"),
    "rollout_correction/run_qwen2_5_7b_fsdp_multi_rs.sh": ({"B006"}, "micro batch 8 over a 4-response mini-batch"),
    # actor_rollout_ref.actor.model_engine is no key of any verl (the engine is the top-level model_engine
    # group): Hydra refuses the override, and the megatron keys then have no megatron config
    "router_replay/run_qwen3_30b_a3b_megatron.sh": ({"L001"}, "actor_rollout_ref.actor.model_engine=megatron"),
    "tuning/scaling/run_qwen2_5_32b_megatron.sh": ({"L001"}, "actor_rollout_ref.actor.model_engine=megatron"),
    # '+' on model.lora.merge, a default since 0.8.0 (verl/trainer/config/model/hf_model.yaml): Hydra refuses it
    "tuning/lora/run_qwen3_8b_merge_fsdp.sh": ({"L006"}, "+actor_rollout_ref.model.lora.merge"),
}


def test_every_script_is_listed_at_most_once() -> None:
    assert len(ALL) == 109
    named = [*NOT_RL, *NO_VERL_COMMAND, *ERRORS]
    assert len(named) == len(set(named)) and set(named) <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_every_verl_main_script_is_read_and_checked(name: str) -> None:
    script = CORPUS / name
    if name in NO_VERL_COMMAND or name in NOT_RL:
        with pytest.raises(ConfigError) as info:
            load_config(script)
        message = str(info.value)
        assert "\n" not in message
        if name in NO_VERL_COMMAND:
            assert "no verl command found" in message
        else:
            assert "not RL training" in message and NOT_RL[name] in message
        return
    report = check(load_config(script))
    if name in ERRORS:
        ids, why = ERRORS[name]
        assert ids <= {f.id for f in report.errors}, why
        assert report.exit_code == 1
    else:
        assert not report.errors, [f"{f.id} {f.message}" for f in report.errors]
        assert report.exit_code == 0


def test_gpt_oss_is_refused_at_main_for_the_key_that_needs_a_plus() -> None:
    report = check(load_config(CORPUS / "grpo_trainer/run_gpt_oss_20b_fsdp.sh", verl_version="main"))
    assert ("L001", ("actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend",)) in \
        {(f.id, f.keys) for f in report.errors}
