"""Loading verl configs: inputs, versions, Hydra semantics, interpolation links, load-time findings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from advisor import load_config
from advisor.datafiles import knowledge_dir
from advisor.errors import ConfigError
from advisor.load._config import _build
from advisor.verl._defaults import default_container, key_index, version_names
from advisor.verl._overrides import parse_override

REPO = Path(__file__).resolve().parents[3]


def ids(cfg) -> list[str]:
    return [f.id for f in cfg.findings]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# --- inputs ---------------------------------------------------------------------------------------------


def test_partial_yaml_sets_keys_and_links_follow(tmp_path: Path) -> None:
    path = write(tmp_path, "run.yaml", """
        actor_rollout_ref:
          actor:
            ppo_mini_batch_size: 64
            ppo_max_token_len_per_gpu: 20000
            use_dynamic_bsz: true
          rollout: {name: vllm, n: 8}
        data: {train_batch_size: 256}
    """)
    cfg = load_config(path)
    assert cfg.kind == "yaml"
    assert cfg.get("data.train_batch_size") == 256
    # critic/critic.yaml:53 critic.ppo_mini_batch_size: ${oc.select:actor_rollout_ref.actor.ppo_mini_batch_size,...}
    assert cfg.get("critic.ppo_mini_batch_size") == 64
    # rollout/rollout.yaml:94,98 log-prob budget and dynamic flag follow the actor's
    assert cfg.get("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu") == 20000
    assert cfg.get("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz") is True
    # actor/actor.yaml:11 rollout_n follows rollout.n
    assert cfg.get("actor_rollout_ref.actor.rollout_n") == 8
    assert set(cfg.user_keys) == {"actor_rollout_ref.actor.ppo_mini_batch_size",
                                  "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                                  "actor_rollout_ref.actor.use_dynamic_bsz", "actor_rollout_ref.rollout.name",
                                  "actor_rollout_ref.rollout.n", "data.train_batch_size"}


def test_yaml_floats_follow_hydra_dialect(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "run.yaml", "actor_rollout_ref: {actor: {optim: {lr: 1e-6}}}\n"))
    assert cfg.get("actor_rollout_ref.actor.optim.lr") == pytest.approx(1e-6)


def test_hydra_dump_uses_overrides_yaml_for_user_keys(tmp_path: Path) -> None:
    tree = default_container("0.7.0", "ppo_trainer")
    tree["data"]["train_batch_size"] = 512
    tree["actor_rollout_ref"]["rollout"]["name"] = "vllm"
    run = tmp_path / "outputs" / "2026-01-01" / "10-00-00"
    write(run, ".hydra/config.yaml", yaml.safe_dump(tree))
    write(run, ".hydra/overrides.yaml", "- data.train_batch_size=512\n- actor_rollout_ref.rollout.name=vllm\n")
    cfg = load_config(run)  # the run directory is enough
    assert cfg.kind == "hydra-dump"
    assert cfg.version == "0.7.0"
    assert set(cfg.user_keys) == {"data.train_batch_size", "actor_rollout_ref.rollout.name"}


def test_script_and_command_line_overrides_last_wins(tmp_path: Path) -> None:
    path = write(tmp_path, "run.sh", """
        python3 -m verl.trainer.main_ppo data.train_batch_size=1024 actor_rollout_ref.rollout.name=vllm \\
            actor_rollout_ref.rollout.n=5
    """)
    cfg = load_config(path, ["data.train_batch_size=512"])
    assert cfg.get("data.train_batch_size") == 512
    assert cfg.get("actor_rollout_ref.rollout.n") == 5
    assert cfg.where("data.train_batch_size") == "command line"
    assert cfg.where("actor_rollout_ref.rollout.n") == f"{path}:3"  # the text starts with a newline


def test_script_config_name_selects_megatron_and_recipe_selects_dapo(tmp_path: Path) -> None:
    mcore = write(tmp_path, "m.sh", "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer.yaml "
                                    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2\n")
    assert load_config(mcore).config_name == "ppo_megatron_trainer"
    dapo = write(tmp_path, "d.sh", "python3 -m recipe.dapo.main_dapo algorithm.filter_groups.enable=True\n")
    cfg = load_config(dapo)
    assert cfg.config_name == "dapo/dapo_trainer"
    assert cfg.get("algorithm.filter_groups.enable") is True
    assert "L001" not in ids(cfg)


USER_CONFIG = """
    hydra:
      searchpath: [file://verl/trainer/config]
    defaults:
      - ppo_megatron_trainer
      - _self_
    data:
      train_batch_size: 256
      max_prompt_length: 2048
    actor_rollout_ref:
      rollout:
        name: sglang
"""


@pytest.mark.parametrize("config_path", ['"$PROJECT_DIR/examples/mt/config"', "examples/mt/config"])
def test_script_reads_the_users_own_config_under_config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              config_path: str) -> None:
    # verl's examples/sglang_multiturn scripts: PROJECT_DIR="$(pwd)" and "run from the project root"
    write(tmp_path, "examples/mt/config/my_grpo.yaml", USER_CONFIG)
    script = write(tmp_path, "examples/mt/run.sh", f"""
        PROJECT_DIR="$(pwd)"
        python3 -m verl.trainer.main_ppo --config-path={config_path} --config-name='my_grpo' \\
            data.train_batch_size=512 actor_rollout_ref.rollout.n=8
    """)
    monkeypatch.chdir(tmp_path / "examples")  # neither the project root nor the script's folder
    cfg = load_config(script)
    assert cfg.config_name == "ppo_megatron_trainer"  # from the YAML's defaults list
    assert cfg.get("data.max_prompt_length") == 2048  # from the YAML
    assert cfg.get("actor_rollout_ref.rollout.name") == "sglang"
    assert cfg.get("data.train_batch_size") == 512  # the command line wins over the config, as in Hydra
    assert cfg.get("actor_rollout_ref.rollout.n") == 8
    line = 1 + textwrap.dedent(USER_CONFIG).splitlines().index("  max_prompt_length: 2048")
    assert cfg.where("data.max_prompt_length") == f"{tmp_path / 'examples/mt/config/my_grpo.yaml'}:{line}"
    assert any(f.id == "L010" and "my_grpo.yaml" in f.message for f in cfg.findings)


def test_script_naming_a_config_that_cannot_be_found_is_one_clear_error(tmp_path: Path) -> None:
    script = write(tmp_path, "run.sh", "python3 -m verl.trainer.main_ppo --config-path=$(pwd)/conf "
                                       "--config-name=missing_cfg data.train_batch_size=8\n")
    with pytest.raises(ConfigError, match=r"--config-name=missing_cfg is neither one of verl's trainer configs "
                                          r"nor a YAML found under --config-path=\$\(pwd\)/conf"):
        load_config(script)


def test_defaults_only() -> None:
    cfg = load_config(None, ["data.train_batch_size=64"], verl_version="0.6.1")
    assert (cfg.version, cfg.kind, cfg.get("data.train_batch_size")) == ("0.6.1", "defaults", 64)


# --- versions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", version_names())
def test_full_dump_of_each_version_is_detected(tmp_path: Path, version: str) -> None:
    write(tmp_path, ".hydra/config.yaml", yaml.safe_dump(default_container(version, "ppo_trainer")))
    assert load_config(tmp_path / ".hydra" / "config.yaml").version == version


@pytest.mark.parametrize("version", version_names())
def test_a_key_only_one_version_has_picks_that_version(version: str) -> None:
    others = [key_index(v, "ppo_trainer") for v in version_names() if v != version]
    own = [k for k in key_index(version, "ppo_trainer").leaves if not any(o.knows(k) for o in others)]
    if not own:
        pytest.skip(f"every key of {version} also exists in another version")
    cfg = load_config(None, [f"{own[0]}=1"])  # a change on that key only
    assert cfg.version == version


def test_explicit_version_and_aliases() -> None:
    assert load_config(None, verl_version="main").version == "0.10.0.dev"
    assert load_config(None, verl_version="v0.7").version == "0.7.1"  # the newest 0.7.x
    assert load_config(None, verl_version="0.9.1").version == "0.9.1"
    # a dev build leads up to its release; a release between two supported ones reads as the one before it
    assert load_config(None, verl_version="0.9.0.dev").version == "0.9.0"
    assert load_config(None, verl_version="0.6.0").version == "0.5.0"
    assert load_config(None, verl_version="0.10.0.dev3").version == "0.10.0.dev"
    with pytest.raises(ConfigError, match="not supported"):
        load_config(None, verl_version="0.11.2")  # newer than any verl the advisor knows
    with pytest.raises(ConfigError, match="not supported"):
        load_config(None, verl_version="0.1")


def test_key_missing_in_forced_version_names_where_it_exists() -> None:
    cfg = load_config(None, ["algorithm.rollout_correction.rollout_is=token"], verl_version="0.5.0")
    finding = next(f for f in cfg.findings if f.id == "L001")
    assert "0.6.1" in finding.message and "--verl-version" in finding.message


# --- Hydra override semantics ---------------------------------------------------------------------------


HYDRA_CASES = [
    "data.train_batch_size=7",  # change an existing key
    "data.no_such_key=1",  # change a missing key
    "+data.no_such_key=1",  # add a missing key
    "+data.train_batch_size=7",  # add an existing key: refused
    "++data.train_batch_size=7",  # force-add an existing key
    "++data.brand_new=7",
    "~data.train_batch_size",  # delete
    "~data.no_such_key",  # delete a missing key: refused
    "actor_rollout_ref.rollout.name=vllm",  # change a '???' (missing) value
    "+actor_rollout_ref.actor.megatron.override_transformer_config.x=1",
    "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton",  # under an empty dict
    "+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton",
    "+actor_rollout_ref.actor.fsdp_config.model_dtype=bf16",  # add on a non-null existing key: refused
    "+actor_rollout_ref.model.override_config.attn_implementation=eager",
]


def _hydra_accepts(override: str) -> bool:
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = OmegaConf.create(default_container("0.10.0.dev", "ppo_megatron_trainer"))
    OmegaConf.set_struct(cfg, True)  # Hydra composes in struct mode
    try:
        ConfigLoaderImpl._apply_overrides_to_config([OverridesParser.create().parse_override(override)], cfg)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("override", HYDRA_CASES)
def test_override_semantics_match_hydra(override: str) -> None:
    # build on the Megatron tree, as _hydra_accepts does, so Megatron-only keys exist
    cfg = _build(None, "defaults", "ppo_megatron_trainer", {}, [], [parse_override(override)], "0.10.0.dev",
                 launch=None)
    refused = any(f.severity == "error" and f.id in ("L001", "L005", "L006") for f in cfg.findings)
    assert refused == (not _hydra_accepts(override))


# --- load-time findings ---------------------------------------------------------------------------------


def test_typo_gets_did_you_mean() -> None:
    cfg = load_config(None, ["actor_rollout_ref.actor.kl_los_coef=0.1"])
    finding = next(f for f in cfg.findings if f.id == "L001")
    assert finding.severity == "error"
    assert "did you mean 'actor_rollout_ref.actor.kl_loss_coef'" in finding.message


def test_key_in_wrong_section_suggests_the_right_one() -> None:
    cfg = load_config(None, ["actor_rollout_ref.rollout.ppo_mini_batch_size=64"])
    finding = next(f for f in cfg.findings if f.id == "L001")
    assert "actor_rollout_ref.actor.ppo_mini_batch_size" in finding.details["did_you_mean"]


def test_deprecated_key_warns_with_replacement() -> None:
    cfg = load_config(None, ["actor_rollout_ref.actor.optim.warmup_style=cosine"], verl_version="0.7.0")
    finding = next(f for f in cfg.findings if f.id == "L002")
    assert finding.severity == "warning"
    assert "actor_rollout_ref.actor.optim.lr_scheduler_type" in finding.message


def test_removed_key_is_an_error_with_replacement() -> None:
    cfg = load_config(None, ["algorithm.rollout_is=true"], verl_version="0.7.0")
    finding = next(f for f in cfg.findings if f.id == "L003")
    assert finding.severity == "error"
    assert "algorithm.rollout_correction.rollout_is" in finding.message
    assert "L001" not in ids(cfg)  # the removal explains it; no generic unknown-key finding


def test_removed_value_sync_mode() -> None:
    cfg = load_config(None, ["actor_rollout_ref.rollout.mode=sync"], verl_version="0.7.0")
    finding = next(f for f in cfg.findings if f.id == "L004")
    assert finding.fix[0].new == "async"
    assert "L004" not in ids(load_config(None, ["actor_rollout_ref.rollout.mode=sync"], verl_version="0.6.1"))


def test_undefined_shell_variable_in_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, "run.sh", "python3 -m verl.trainer.main_ppo trainer.nnodes=$NNODES\n")
    cfg = load_config(path)
    wrong = next(f for f in cfg.findings if f.id == "L008")
    assert "trainer.nnodes" in wrong.message and "shell variable" in wrong.message
    assert any(f.id == "L009" and f.details["variable"] == "NNODES" for f in cfg.findings)
    assert load_config(path, ["trainer.nnodes=2"]).get("trainer.nnodes") == 2


def test_invalid_override_in_script_is_a_finding(tmp_path: Path) -> None:
    path = write(tmp_path, "run.sh", "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=<path>\n")
    cfg = load_config(path)
    assert "L011" in ids(cfg)


# --- unreadable input: one clear line ---------------------------------------------------------------


@pytest.mark.parametrize("name, content, message", [
    pytest.param("bad.yaml", "data: [1, 2\n", "malformed YAML", id="malformed"),
    pytest.param("list.yaml", "- a\n- b\n", "not a mapping", id="yaml-list"),
    pytest.param("empty.yaml", "  \n", "is empty", id="empty"),
    pytest.param("m.jsonl", '{"step": 1, "data": {"a": 1}}\n', "metrics", id="metrics-as-config"),
    pytest.param("x.sh", "echo hi\n", "no verl command", id="script-without-verl"),
    pytest.param("sft.sh", "torchrun --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer data.micro_batch_size=4\n",
                 r"runs verl.trainer.fsdp_sft_trainer \(verl's SFT trainer; .*\), not RL training", id="sft-script"),
    pytest.param("bin.yaml", b"\x00\x01\x02garbage", "binary", id="binary"),
    pytest.param("latin.yaml", b"caf\xe9: 1\n", "UTF-8", id="not-utf8"),
])
def test_unreadable_inputs(tmp_path: Path, name: str, content: str | bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_missing_file_and_bare_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"without \.hydra/config\.yaml"):
        load_config(tmp_path)


# --- the knowledge snapshot ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", version_names())
def test_fast_yaml_loader_matches_omegaconf_loader(version: str) -> None:
    path = knowledge_dir() / "verl_defaults" / version / "ppo_trainer.yaml"
    fast = default_container(version, "ppo_trainer")
    reference = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert fast == reference


def test_generated_defaults_are_up_to_date() -> None:
    # needs verl's wheels (pip download verl==X --no-deps -d DIR) and a clone of verl-project/verl
    wheels = Path(os.environ.get("VERL_WHEELS", "/work/wheels"))
    repo = Path(os.environ.get("VERL_REPO", "/work/.mirror/verl-project+verl/repo"))
    if not (wheels.is_dir() and any(wheels.glob("verl-*.whl")) and repo.is_dir()):
        pytest.skip("set VERL_WHEELS (verl's release wheels) and VERL_REPO (a verl git clone) to run")
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "generate_verl_defaults.py"), "--check",
                             "--wheels", str(wheels), "--verl-repo", str(repo)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_model_engine_choice_composes_that_engines_config(tmp_path: Path) -> None:
    # verl >= 0.7.1 picks the engine with the model_engine group: ppo_megatron_trainer.yaml is ppo_trainer with
    # `override model_engine: megatron` (0.9.1 verl/trainer/config/ppo_megatron_trainer.yaml)
    path = write(tmp_path, "run.sh", "python3 -m verl.trainer.main_ppo model_engine=megatron "
                 "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 trainer.use_v1=true\n")
    cfg = load_config(path)
    assert cfg.config_name == "ppo_megatron_trainer" and cfg.version == "0.9.1"
    assert not [f for f in cfg.findings if f.severity == "error"]
    veomni = load_config(None, ["model_engine=veomni", "actor_rollout_ref.actor.veomni.param_offload=true"],
                         verl_version="0.9.1")
    assert not [f for f in veomni.findings if f.id == "L001"]


def test_hydra_settings_and_group_choices_from_other_packages_are_not_unknown_keys(tmp_path: Path) -> None:
    # verl main's megatron-lite examples compose the actor from a package the advisor cannot see
    path = write(tmp_path, "run.sh", "python3 -m verl.trainer.main_ppo hydra.searchpath=[pkg://verl_mlite.config] "
                 "actor@actor_rollout_ref.actor=mlite_actor actor_rollout_ref.actor.engine.tp=4 "
                 "trainer.nnodes=1\n")
    cfg = load_config(path)
    assert not [f for f in cfg.findings if f.severity == "error"]
    choice = next(f for f in cfg.findings if f.id == "L013")
    assert "mlite_actor" in choice.message and "pkg://verl_mlite.config" in choice.message
    assert cfg.get("actor_rollout_ref.actor.engine.tp") == 4


def test_detection_prefers_a_version_where_keys_set_without_plus_exist(tmp_path: Path) -> None:
    # ray_kwargs.ray_init.runtime_env.py_executable is a default in 0.9.1 and main, not in 0.9.0, where
    # Hydra would need '+': a script setting it without '+' is not read as 0.9.0
    path = write(tmp_path, "run.sh", "python3 -m verl.trainer.main_ppo "
                 "ray_kwargs.ray_init.runtime_env.py_executable=uv\n")
    assert load_config(path).version in ("0.9.1", "0.10.0.dev")


def test_a_field_that_takes_text_is_not_a_type_error() -> None:
    # 0.9.1 verl/trainer/config/algorithm.py:180: rollout_is_threshold: str | float ("lower_upper" bounds)
    cfg = load_config(None, ["algorithm.rollout_correction.rollout_is_threshold=0.5_4.0",
                             "data.train_batch_size=abc"], verl_version="0.9.1")
    assert [f.keys for f in cfg.findings if f.id == "L008"] == [("data.train_batch_size",)]
