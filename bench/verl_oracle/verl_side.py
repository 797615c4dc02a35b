"""The verl side of the differential harness: run a verl release's own config validation on many configs.

Runs INSIDE one release's test environment (``scripts/install_verl_oracle.sh``: the release wheel on
``sys.path``, no GPU packages) as a subprocess of ``bench/verl_oracle/harness.py``: reads a JSON list of configs
(each a list of ``[dotted key, value]`` overrides) on stdin, writes one JSON result per config on stdout:
``{"ok": bool, "error": "<exception type>: <message>", "line": "<verl source line that raised>", "where":
"<file>:<line>"}``. Imports nothing of the advisor.

The release's ``verl/trainer/config/ppo_trainer.yaml`` is composed once with Hydra (as ``main_ppo``'s
``@hydra.main`` does); each config is that tree with its overrides set by ``OmegaConf.update`` (keys that exist
in the tree only, as Hydra's struct mode demands), then the code verl runs on a config before any GPU work:

* 0.7.x, 0.9.x: ``main_ppo.main``'s ``validate_config(config, use_reference_policy=need_reference_policy(config),
  use_critic=need_critic(config))`` (0.9.1 verl/trainer/main_ppo.py:177-181, 0.7.1 main_ppo.py:299-303;
  verl/utils/config.py:88-217 (0.9.1), 74-202 (0.7.1)), which builds ActorConfig/CriticConfig through
  ``omega_conf_to_dataclass`` (their ``__post_init__`` and ``validate``), then the rollout worker's
  ``omega_conf_to_dataclass(config.rollout)`` (0.9.1 verl/workers/engine_workers.py:651, 0.7.1
  verl/workers/fsdp_workers.py:690). The critic's model is a tiny local one (``_fake_model``); the world is the
  config's own ``trainer.n_gpus_per_node`` × ``trainer.nnodes`` (validate_config reads no device).
* 0.4.x: ``RayPPOTrainer.__init__`` (0.4.1 verl/trainer/ppo/ray_trainer.py:280-361: hybrid engine, the
  reference policy from main_ppo.py:155-157's role mapping, the KL controller, the critic by estimator) and its
  ``_validate_config`` (ray_trainer.py:363-481); only ``_create_dataloader`` (reads the data files) is skipped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
import traceback
import warnings
from typing import Any


def _compose() -> Any:
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer")


def _base_tree(model_dir: str) -> dict[str, Any]:
    """The release's composed ppo_trainer config as plain data, the model paths on the fake model."""
    from omegaconf import OmegaConf

    with contextlib.redirect_stdout(io.StringIO()):
        base = OmegaConf.to_container(_compose(), resolve=False)
    assert isinstance(base, dict)
    for section in (base.get("critic", {}).get("model"), base.get("actor_rollout_ref", {}).get("model")):
        if isinstance(section, dict) and "path" in section:
            section["path"] = model_dir
    return base


def _validator(version: str):
    """The release's validation, its modules imported now: an import that fails is the harness's fault, not a
    rejection of a config."""
    if tuple(int(p) for p in version.split(".")[:2]) < (0, 7):
        import verl.trainer.ppo.ray_trainer
        return _validate_04
    import verl.trainer.ppo.utils
    import verl.utils.config  # noqa: F401
    return _validate_07


def _validate_07(config: Any) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    use_ref = need_reference_policy(config)
    validate_config(config=config, use_reference_policy=use_ref, use_critic=need_critic(config))
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)


def _fake_model(directory: str) -> str:
    """A tiny local Hugging Face model directory (config.json and a word-level tokenizer, no weights): the
    critic's HFModelConfig (0.9.1 verl/workers/config/model.py:148-230) reads its config and tokenizer when
    validate_config builds the critic's config; the rules checked here never depend on the model's size."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, "a": 3}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                            unk_token="<unk>").save_pretrained(directory)
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
              "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "vocab_size": 4, "max_position_embeddings": 32768}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    return directory


def _validate_04(config: Any) -> None:
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, Role

    class _Trainer(RayPPOTrainer):
        def _create_dataloader(self, *args: Any, **kwargs: Any) -> None:  # reads the data files: not config
            return None

    # main_ppo.py:128-157 (0.4.1): the role mapping TaskRunner builds; RefPolicy when a KL term needs it
    mapping = {Role.ActorRollout: object, Role.Critic: object}
    if config.algorithm.use_kl_in_reward or config.actor_rollout_ref.actor.use_kl_loss:
        mapping[Role.RefPolicy] = object
    _Trainer(config=config, tokenizer=None, role_worker_mapping=mapping, resource_pool_manager=None)


def _leaves(tree: Any, out: set[str]) -> set[str]:
    """The leaf key names of a config tree (what a message can name)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if isinstance(value, dict):
                _leaves(value, out)
            else:
                out.add(str(key))
    return out


def _result(exc: BaseException, leaves: set[str]) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    verl_frames = [f for f in frames if f"{os.sep}verl{os.sep}" in f.filename and "verl_side" not in f.filename]
    last = verl_frames[-1] if verl_frames else (frames[-1] if frames else None)
    where = ""
    if last is not None:
        where = f"{last.filename.split(os.sep + 'verl' + os.sep, 1)[-1]}:{last.lineno}"
    line = (last.line or "") if last else ""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", f"{exc} {line}"))
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "line": line,
            "where": f"verl/{where}" if where else "", "named": sorted(words & leaves)}


def main() -> None:
    from omegaconf import OmegaConf

    warnings.simplefilter("ignore")
    version = sys.argv[1]
    requests = json.load(sys.stdin)
    base = _base_tree(_fake_model(tempfile.mkdtemp(prefix="verl-oracle-model-")))
    validate = _validator(version)
    leaves = _leaves(base, set())
    out = []
    for overrides in requests:
        config = OmegaConf.create(base)
        OmegaConf.set_struct(config, True)
        try:
            for key, value in overrides:
                OmegaConf.update(config, key, value, merge=False)
            with contextlib.redirect_stdout(io.StringIO()):
                validate(config)
            out.append({"ok": True})
        except Exception as exc:  # verl's rejection: any exception its validation raises
            out.append(_result(exc, leaves))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
