"""Recipes: their own configs composed as Hydra composes them, their entry points, their trainers' facts;
and the entry points that are not RL training."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from advisor import load_config
from advisor.checks._report import check
from advisor.datafiles import knowledge_dir
from advisor.errors import ConfigError
from advisor.load._script import parse_launch_script
from advisor.verl._defaults import default_container, key_index, version_names
from advisor.verl._recipes import _index, _pick, config_base, find_entry_point, resolve_module

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "tests" / "fixtures" / "verl_recipe"  # verl-recipe @ 48ea0a7 (SOURCE.md)
RECIPE_MIRROR = Path("/work/.mirror/verl-project+verl-recipe/repo")
VERL_MIRROR = Path("/work/.mirror/verl-project+verl/repo")
LATEST = version_names()[-1]
# every config of verl-recipe HEAD (the fixture copy), by id
RECIPE_CONFIGS = sorted(c for c, by_source in _index()["configs"].items() if "verl-recipe" in by_source)
# the oldest and newest verl versions that read verl-recipe's configs (older ones read their own recipe/)
_READS_RECIPE_REPO = [v for v in version_names() if _pick({"verl-recipe": 0, "verl-0.7.0": 0}, v) == "verl-recipe"]
RECIPE_REPO_VERSIONS = sorted({_READS_RECIPE_REPO[0], _READS_RECIPE_REPO[-1]})


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _hydra_compose(config_dir: Path, name: str) -> dict:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name=name)
    container = OmegaConf.to_container(cfg, resolve=False)
    container.pop("hydra", None)
    return container


# --- composition ------------------------------------------------------------------------------------------


def _compose_copy(tmp_path: Path, files: dict[Path, str], name: str, version: str) -> dict:
    """Hydra's own compose of a copy of a recipe's config folder (``files``: path in the folder -> text), with
    its ``hydra.searchpath`` (file://verl/trainer/config, pkg://verl.trainer.config) pointed at the verl base
    configs of ``version``."""
    folder = tmp_path / "config"
    base_dir = tmp_path / "verl_trainer_config"
    base_dir.mkdir()
    for base in ("ppo_trainer", "ppo_megatron_trainer"):
        (base_dir / f"{base}.yaml").write_text((knowledge_dir() / "verl_defaults" / version / f"{base}.yaml")
                                               .read_text())
    for relative, text in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        data = yaml.safe_load(text)
        if isinstance(data, dict) and "hydra" in data:
            data["hydra"]["searchpath"] = [f"file://{base_dir}"]
            text = yaml.safe_dump(data, sort_keys=False)
        target.write_text(text)
    return _hydra_compose(folder, name)


@pytest.mark.parametrize("config_id", RECIPE_CONFIGS)
@pytest.mark.parametrize("version", RECIPE_REPO_VERSIONS)
def test_recipe_config_composes_as_hydra_does(tmp_path: Path, config_id: str, version: str) -> None:
    """Hydra's compose of the fixture copy of verl-recipe gives the advisor's tree (``_self_`` merged last over
    that version's base, interpolations kept, nested config groups of rep_exp included)."""
    recipe, name = config_id.rsplit("/", 1)
    source = CORPUS / recipe / "config"
    files = {p.relative_to(source): p.read_text() for p in source.rglob("*.yaml")}
    assert default_container(version, config_id) == _compose_copy(tmp_path, files, name, version)


def _tag_configs() -> list[tuple[str, str]]:
    return sorted((c, s.removeprefix("verl-")) for c, by_source in _index()["configs"].items() for s in by_source
                  if s.startswith("verl-0.") and s.removeprefix("verl-") in version_names())


@pytest.mark.skipif(not VERL_MIRROR.is_dir(), reason="git mirror of verl absent")
@pytest.mark.parametrize(("config_id", "version"), _tag_configs())
def test_release_recipe_config_composes_as_hydra_does(tmp_path: Path, config_id: str, version: str) -> None:
    """verl <= 0.7.0 read the recipe/ folder of its own release: Hydra's compose of that folder (from verl's git
    mirror at the release tag) gives the advisor's tree for that release."""
    recipe, name = config_id.rsplit("/", 1)
    folder = f"recipe/{recipe}/config"
    tag = _index()["sources"][f"verl-{version}"]["rev"]
    listing = subprocess.run(["git", "-C", str(VERL_MIRROR), "ls-tree", "-r", "--name-only", tag, folder],
                             capture_output=True, text=True, check=True).stdout.split()
    files = {Path(p).relative_to(folder): subprocess.run(["git", "-C", str(VERL_MIRROR), "show", f"{tag}:{p}"],
                                                         capture_output=True, text=True, check=True).stdout
             for p in listing if p.endswith(".yaml")}
    assert default_container(version, config_id) == _compose_copy(tmp_path, files, name, version)


def test_composition_is_on_the_checked_versions_base() -> None:
    """sppo composes on ppo_trainer: its own keys win, the rest is that version's ppo_trainer."""
    for version in version_names():
        tree = default_container(version, "sppo/sppo_trainer")
        base = default_container(version, "ppo_trainer")
        assert tree["algorithm"]["sppo_eta"] == 1.0  # sppo/config/sppo_trainer.yaml
        assert tree["actor_rollout_ref"]["rollout"]["name"] == "sglang"
        assert tree["data"] == base["data"]
    assert config_base("sppo/sppo_trainer") == "ppo_trainer"
    assert config_base("dapo/dapo_transfer_queue/dapo_transfer_queue_trainer") == "ppo_megatron_trainer"
    assert config_base("gkd/megatron/on_policy_distill_trainer") is None  # a whole config


def test_old_verl_reads_the_recipe_of_its_own_release() -> None:
    """verl 0.4.1's DAPO recipe kept the overlong buffer under reward_model (recipe/dapo/config at v0.4.1);
    verl-recipe HEAD moved it to reward.reward_kwargs.overlong_buffer_cfg."""
    old = default_container("0.4.1", "dapo/dapo_trainer")
    new = default_container(LATEST, "dapo/dapo_trainer")
    assert "overlong_buffer" in old["reward_model"]
    assert "overlong_buffer_cfg" in new["reward"]["reward_kwargs"]


# --- entry points -----------------------------------------------------------------------------------------


def test_spo_entry_point_is_found_and_its_keys_are_known(tmp_path: Path) -> None:
    script = write(tmp_path, "spo.sh", """\
        python3 -m recipe.spo.spo_main_ppo algorithm.adv_estimator=grpo trainer.spo.enable=True \\
            trainer.spo.offline_N=4 trainer.debug=true
        """)
    launch = parse_launch_script(script.read_text(), str(script))
    assert launch.entry_point == "recipe.spo.spo_main_ppo"
    cfg = load_config(script)
    assert cfg.config_name == "spo/spo_trainer"
    assert not [f for f in cfg.findings if f.id == "L001"]  # spo/config/spo_trainer.yaml defines trainer.spo.*
    plain = write(tmp_path, "ppo.sh", "python3 -m verl.trainer.main_ppo trainer.spo.enable=True\n")
    assert [f.id for f in load_config(plain).findings if f.id == "L001"] == ["L001"]


def test_sppo_has_no_critic(tmp_path: Path) -> None:
    """sppo_ray_trainer.py:115 sets ``self.use_critic = False``: no critic micro batch is needed."""
    body = ("data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 "
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2 trainer.n_gpus_per_node=8 "
            "algorithm.adv_estimator=gae")
    sppo = check(load_config(write(tmp_path, "sppo.sh", f"python3 -m recipe.sppo.main_sppo {body}\n")))
    ppo = check(load_config(write(tmp_path, "ppo.sh", f"python3 -m verl.trainer.main_ppo {body}\n")))
    critic = [f for f in ppo.findings if any(k.startswith("critic.") for k in f.keys)]
    assert critic  # main_ppo with gae builds a critic and needs its micro batch
    assert not [f for f in sppo.findings if any(k.startswith("critic.") for k in f.keys)]
    entry = find_entry_point("recipe.sppo.main_sppo", LATEST)
    assert entry is not None and entry.critic is False
    assert any("sppo_ray_trainer.py:115" in s for s in entry.critic_source)


def test_critic_enable_on_a_critic_free_recipe_is_a_no_op_warning(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "sppo.sh", "python3 -m recipe.sppo.main_sppo critic.enable=true\n"))
    w003 = [f for f in check(cfg).findings if f.id == "W003"]
    assert len(w003) == 1 and "never builds a critic" in w003[0].message


def test_config_name_inside_a_recipe_picks_its_config(tmp_path: Path) -> None:
    mcore = write(tmp_path, "m.sh", "python3 -m recipe.dapo.main_dapo --config-name=dapo_megatron_trainer "
                                    "reward.reward_kwargs.overlong_buffer_cfg.enable=True\n")
    cfg = load_config(mcore, verl_version=LATEST)
    assert cfg.config_name == "dapo/dapo_megatron_trainer"
    assert not [f for f in cfg.findings if f.id == "L001"]
    # --config-path naming another recipe's folder: recipe/qat/config/dapo_qat_trainer.yaml
    qat = write(tmp_path, "q.sh", 'python3 -m recipe.dapo.main_dapo --config-path "$PWD/recipe/qat/config" '
                                  "--config-name dapo_qat_trainer\n")
    assert load_config(qat).config_name == "qat/dapo_qat_trainer"


def test_a_recipe_module_run_from_its_folder_is_found() -> None:
    assert resolve_module("main_gkd", "/x/gkd/megatron") == "recipe.gkd.megatron.main_gkd"
    assert resolve_module("rep_exp.main_rep_exp", "/x/rep_exp") == "recipe.rep_exp.main_rep_exp"
    assert resolve_module("main_gkd", "/x/elsewhere") is None


def test_dapo_guess_only_where_the_core_config_lacks_filter_groups(tmp_path: Path) -> None:
    path = write(tmp_path, "run.yaml", "algorithm:\n  filter_groups:\n    enable: true\n")
    for version in version_names():
        core = key_index(version, "ppo_trainer").knows("algorithm.filter_groups.enable")
        cfg = load_config(path, verl_version=version)
        assert cfg.config_name == ("ppo_trainer" if core else "dapo/dapo_trainer"), version


# --- entry points that are not RL training ---------------------------------------------------------------


NON_RL = [
    ("python3 -m verl.trainer.main_generation trainer.nnodes=1 data.path=x.parquet", "generation only"),
    ("python3 -m verl.trainer.main_generation_server trainer.nnodes=1", "generation only"),
    ("python3 -m verl.trainer.main_eval data.path=x.parquet", "an evaluation"),
    ("torchrun --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer data.micro_batch_size=4", "SFT trainer"),
    ("torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer data.micro_batch_size=4", "SFT trainer"),
    ("python3 -m recipe.r1.main_eval data.path=x.parquet", "an evaluation"),
]


@pytest.mark.parametrize(("command", "what"), NON_RL, ids=[c.split()[-2] for c, _ in NON_RL])
def test_non_rl_entry_points_are_refused_with_one_line(tmp_path: Path, command: str, what: str) -> None:
    script = write(tmp_path, "run.sh", f"set -x\n{command}\n")
    with pytest.raises(ConfigError, match=what) as info:
        load_config(script)
    assert "not RL training" in str(info.value)
    result = subprocess.run([sys.executable, "-m", "advisor", "check", str(script)], capture_output=True, text=True,
                            cwd=REPO)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(script) in lines[0] and "Traceback" not in result.stderr


def test_an_rl_run_after_a_generation_step_is_checked(tmp_path: Path) -> None:
    script = write(tmp_path, "run.sh", """\
        python3 -m verl.trainer.main_generation data.path=x.parquet
        python3 -m verl.trainer.main_ppo data.train_batch_size=32
        """)
    launch = parse_launch_script(script.read_text(), str(script))
    assert launch.entry_point == "verl.trainer.main_ppo" and launch.line == 2


# --- the generated data ----------------------------------------------------------------------------------


@pytest.mark.skipif(not (RECIPE_MIRROR.is_dir() and VERL_MIRROR.is_dir()), reason="git mirrors of verl absent")
def test_generated_recipe_configs_are_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "generate_recipe_configs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- trainer facts read from the recipes' Python -------------------------------------------------------------


def _errors(tmp_path: Path, name: str, command: str, version: str | None = None) -> set[str]:
    cfg = load_config(write(tmp_path, name, command + "\n"), verl_version=version)
    return {f"{f.id}:{','.join(f.keys)}" for f in check(cfg).errors}


def test_gkd_needs_no_log_prob_micro_batch(tmp_path: Path) -> None:
    """gkd's trainer has its own fit (gkd/megatron/ray_trainer.py:533) that never recomputes old log-probs, and its
    TaskRunner never runs verl's validate_config: the rollout log-prob micro batch is never read."""
    body = ("data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 trainer.n_gpus_per_node=8")
    key = "B003:actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"
    assert key in _errors(tmp_path, "ppo.sh", f"python3 -m verl.trainer.main_ppo {body}", LATEST)
    assert key not in _errors(tmp_path, "gkd.sh", f"python3 -m recipe.gkd.megatron.main_gkd {body}", LATEST)
    entry = find_entry_point("recipe.gkd.megatron.main_gkd")
    assert entry is not None and entry.old_log_prob is False and entry.validate_config is False


def test_atropos_never_runs_validate_config(tmp_path: Path) -> None:
    """atropos/main_atropos.py:41 is its own TaskRunner: validate_config's mini-batch rule (B002) is never run."""
    body = "data.train_batch_size=2 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.rollout.n=4"
    ppo = _errors(tmp_path, "p.sh", f"python3 -m verl.trainer.main_ppo {body}")
    atropos = _errors(tmp_path, "a.sh", f"python3 -m recipe.atropos.main_atropos {body}")
    assert any(e.startswith("B002") for e in ppo) and not any(e.startswith("B002") for e in atropos)


def test_dance_grpo_rollout_rules_do_not_apply(tmp_path: Path) -> None:
    """dance_grpo's diffusion worker (diffusion_workers.py:92) is its own: verl's RolloutConfig, which refuses
    mode 'sync' since verl 0.7.0, is never built (its trainer reads mode itself, dance_ray_trainer.py:265-269)."""
    body = "actor_rollout_ref.rollout.mode=sync"
    ppo = _errors(tmp_path, "p.sh", f"python3 -m verl.trainer.main_ppo {body}", LATEST)
    assert any(e.startswith("L004") for e in ppo)
    dance = _errors(tmp_path, "d.sh", f"python3 -m recipe.dance_grpo.dance_grpo_mindspeed_mm.main_dance {body}", LATEST)
    assert not any(e.startswith(("L004", "R")) for e in dance)


def test_the_verl_a_recipe_is_tested_with_is_preferred() -> None:
    """spo/REQUIRED_VERL.txt pins verl d7944c0 (2025-10-28): the script is read as a release next to that commit
    (the one before it when its keys fit both), not as the newest verl."""
    from advisor.verl._defaults import supported_versions

    pin = find_entry_point("recipe.spo.spo_main_ppo").verl_pin
    dated = sorted(supported_versions(), key=lambda i: i.date)
    window = [i.version for i in dated if i.date <= pin["date"]][-1:] + \
        [i.version for i in dated if i.date > pin["date"]][:1]
    cfg = load_config(CORPUS / "spo" / "estimate_offline_values" / "eval.sh")
    assert cfg.version in window
    assert any("REQUIRED_VERL.txt" in f.message for f in cfg.findings if f.id == "L010")


def test_a_script_for_an_older_recipe_keeps_its_version() -> None:
    """verl v0.7.0's own DAPO scripts set reward_model.overlong_buffer.*, which verl-recipe's DAPO config (pinned to
    a 2026 verl) moved; they are read as the release whose recipe has those keys, with no unknown key."""
    script = REPO / "tests" / "fixtures" / "verl_scripts" / "v0.7.0" / "recipe" / "dapo" / "test_dapo_7b.sh"
    cfg = load_config(script)
    assert not [f for f in cfg.findings if f.id == "L001"]
    assert "overlong_buffer" in default_container(cfg.version, cfg.config_name)["reward_model"]
