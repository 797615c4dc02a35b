"""Read verl's own default configs from a wheel, a source tree or a git commit, never importing verl.

Used by ``scripts/generate_verl_defaults.py`` (which writes ``knowledge/verl_defaults/``) and, at run time,
by ``_installed`` for a verl installed where the advisor runs. Paths are relative to the distribution root
(``verl/trainer/config/ppo_trainer.yaml``).

- verl ≥ 0.5 ships ``_generated_<config>.yaml``, its own flattening of the Hydra composition
  (``scripts/generate_trainer_config.sh`` in verl); earlier releases have one monolithic ``<config>.yaml``.
- Keys that verl's config dataclasses accept but the YAML does not list (``+key=...``) are read from the
  dataclasses' annotated fields with ``ast``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

CONFIG_DIR = "verl/trainer/config"
# Where verl keeps the dataclasses behind its config nodes (``_target_: verl.workers.config.FSDPActorConfig``).
DATACLASS_DIRS = ("verl/workers/config", "verl/trainer/config", "verl/utils/profiler")


class VerlSource(Protocol):
    @property
    def label(self) -> str:
        """What the source is, for messages (read only: a frozen TreeSource's field satisfies it)."""

    def read(self, path: str) -> str | None:
        """The text of a file, or None when it is not there."""

    def files(self, prefix: str) -> list[str]:
        """Every file path under a folder."""


@dataclass(frozen=True)
class TreeSource:
    """A folder holding the ``verl/`` package (a site-packages dir, a checkout, an unpacked wheel)."""

    root: Path
    label: str = ""

    def read(self, path: str) -> str | None:
        file = self.root / path
        return file.read_text(encoding="utf-8") if file.is_file() else None

    def files(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())


@dataclass(frozen=True)
class WheelSource:
    """A verl wheel as the package index serves it (``pip download verl==0.9.1 --no-deps``)."""

    wheel: Path
    label: str = ""

    def read(self, path: str) -> str | None:
        import zipfile  # lazy: only a wheel source opens one

        with zipfile.ZipFile(self.wheel) as zf:
            try:
                return zf.read(path).decode("utf-8")
            except KeyError:
                return None

    def files(self, prefix: str) -> list[str]:
        import zipfile  # lazy: only a wheel source opens one

        with zipfile.ZipFile(self.wheel) as zf:
            return sorted(n for n in zf.namelist() if n.startswith(prefix.rstrip("/") + "/"))


@dataclass(frozen=True)
class GitSource:
    """A commit of a verl git repository (bare or not)."""

    repo: Path
    commit: str
    label: str = ""

    def read(self, path: str) -> str | None:
        import subprocess  # lazy: only a git source runs git (and check's start-up is measured)

        out = subprocess.run(["git", "-C", str(self.repo), "show", f"{self.commit}:{path}"],
                             capture_output=True, text=True)
        return out.stdout if out.returncode == 0 else None

    def files(self, prefix: str) -> list[str]:
        import subprocess

        out = subprocess.run(["git", "-C", str(self.repo), "ls-tree", "-r", "--name-only", self.commit, prefix],
                             capture_output=True, text=True, check=True)
        return out.stdout.split()


def _load_yaml(text: str) -> Any:
    import yaml
    from omegaconf._utils import get_yaml_loader  # Hydra's YAML dialect (1e-6 is a float)

    return yaml.load(text, Loader=get_yaml_loader())


def engine_configs(source: VerlSource) -> dict[str, str]:
    """Trainer config name -> the ``model_engine`` choice that composes it (verl >= 0.7.1 selects the training
    engine with the ``model_engine`` config group: ``model_engine=megatron`` composes what
    ``ppo_megatron_trainer.yaml`` does). The FSDP ``dp`` engine is ``ppo_trainer`` itself."""
    out = {}
    for path in source.files(f"{CONFIG_DIR}/model_engine"):
        engine = path.rsplit("/", 1)[-1].removesuffix(".yaml")
        if path.endswith(".yaml") and engine != "dp":
            out[f"ppo_{engine}_trainer"] = engine
    return out


def default_tree(source: VerlSource, config_name: str) -> tuple[dict[str, Any], str] | None:
    """(verl's fully composed default config as plain dicts, the file it came from), or None.

    A config with a Hydra ``defaults`` list is composed with Hydra's own ``compose`` (as verl's entry points
    do), from a copy of the source's config folder; a monolithic one (verl ≤ 0.4) is read as it is.
    Comments, the ``defaults`` list and ``hydra:`` settings are dropped; ``${...}`` interpolations are kept
    verbatim so that a user's change to a source key flows into the keys that follow it.
    """
    path = f"{CONFIG_DIR}/{config_name}.yaml"
    text = source.read(path)
    engine = engine_configs(source).get(config_name)
    if text is None and engine is not None:  # ppo_veomni_trainer: ppo_trainer with model_engine=veomni
        tree = composed_tree(source, "ppo_trainer", [f"model_engine={engine}"])
        tree.pop("hydra", None)
        return tree, f"{CONFIG_DIR}/ppo_trainer.yaml with model_engine={engine}"
    if text is None:
        return None
    tree = _load_yaml(text)
    if not isinstance(tree, dict):
        return None
    if "defaults" in tree and not _only_self(tree["defaults"]):
        tree = composed_tree(source, config_name)
    tree.pop("defaults", None)
    tree.pop("hydra", None)
    return tree, path


def generated_tree(source: VerlSource, config_name: str) -> dict[str, Any] | None:
    """verl's own flattening ``_generated_<config>.yaml`` (verl ≥ 0.5), a cross-check of the composition."""
    text = source.read(f"{CONFIG_DIR}/_generated_{config_name}.yaml")
    if text is None:
        return None
    tree = _load_yaml(text)
    if isinstance(tree, dict):
        tree.pop("defaults", None)
        tree.pop("hydra", None)
    return tree if isinstance(tree, dict) else None


def composed_tree(source: VerlSource, config_name: str, overrides: Iterable[str] = ()) -> dict[str, Any]:
    """``<config>.yaml`` composed by Hydra from the source's config folder (with Hydra overrides)."""
    import tempfile

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with tempfile.TemporaryDirectory() as tmp:
        for path in source.files(CONFIG_DIR):
            if path.endswith(".yaml"):
                target = Path(tmp) / path[len(CONFIG_DIR) + 1:]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(source.read(path) or "", encoding="utf-8")
        with initialize_config_dir(config_dir=tmp, version_base=None):
            cfg = compose(config_name=config_name, overrides=list(overrides))
    tree = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(tree, dict)
    return cast("dict[str, Any]", tree)  # a composed config's keys are names


def _only_self(defaults: Any) -> bool:
    return isinstance(defaults, list) and all(d == "_self_" for d in defaults)


def dataclass_classes(source: VerlSource) -> dict[str, tuple[list[str], list[str]]]:
    """class name -> (its annotated field names, its base class names), for verl's config modules."""
    classes: dict[str, tuple[list[str], list[str]]] = {}
    for folder in DATACLASS_DIRS:
        for path in source.files(folder):
            if not path.endswith(".py"):
                continue
            text = source.read(path)
            if text is None:
                continue
            try:
                module = ast.parse(text)
            except SyntaxError:
                continue
            for node in ast.walk(module):
                if isinstance(node, ast.ClassDef):
                    fields = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
                              and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")]
                    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                    classes[node.name] = (fields, bases)
    return classes


def field_annotations(source: VerlSource) -> dict[str, dict[str, str]]:
    """class name -> {field: its annotation's source text}, for verl's config dataclasses."""
    out: dict[str, dict[str, str]] = {}
    for folder in DATACLASS_DIRS:
        for path in source.files(folder):
            text = source.read(path) if path.endswith(".py") else None
            try:
                module = ast.parse(text) if text else None
            except SyntaxError:
                module = None
            for node in ast.walk(module) if module else ():
                if isinstance(node, ast.ClassDef):
                    out[node.name] = {n.target.id: ast.unparse(n.annotation) for n in node.body
                                      if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return out


def text_fields(tree: Mapping[str, Any], classes: Mapping[str, tuple[list[str], list[str]]],
                notes: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Dotted keys whose YAML default is a number or a boolean but whose dataclass field admits text
    (``str | float``, ``Any``): a string there is not a type error (0.9.1 RolloutCorrectionConfig's
    rollout_is_threshold takes "0.5_4.0"). Nested nodes take the class their parent's field names."""
    out: list[str] = []

    def fields_of(name: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
        if name in seen or name not in classes:
            return {}
        merged: dict[str, str] = {}
        for base in classes[name][1]:
            merged.update(fields_of(base, seen | {name}))
        merged.update(notes.get(name, {}))
        return merged

    def walk(node: Any, path: str, cls: str | None) -> None:
        if not isinstance(node, Mapping):
            return
        target = node.get("_target_")
        cls = target.rsplit(".", 1)[-1] if isinstance(target, str) else cls
        fields = fields_of(cls) if cls else {}
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            note = fields.get(str(key), "")
            if isinstance(value, (int, float)) and re.search(r"\b(str|Any)\b", note):
                out.append(here)
            child = next((c for c in re.findall(r"\w+", note) if c in classes and c != cls), None)
            walk(value, here, child)

    walk(tree, "", None)
    return sorted(out)


def _all_fields(name: str, classes: Mapping[str, tuple[list[str], list[str]]],
                seen: frozenset[str] = frozenset()) -> list[str]:
    if name not in classes or name in seen:
        return []
    fields, bases = classes[name]
    inherited = [f for b in bases for f in _all_fields(b, classes, seen | {name})]
    return list(dict.fromkeys(inherited + fields))


def extra_fields(tree: Mapping[str, Any], classes: Mapping[str, tuple[list[str], list[str]]]
                 ) -> dict[str, list[str]]:
    """Per config node with a ``_target_`` dataclass: the dataclass fields its YAML does not list."""
    out: dict[str, list[str]] = {}

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, Mapping):
            return
        target = node.get("_target_")
        if isinstance(target, str):
            extra = [f for f in _all_fields(target.rsplit(".", 1)[-1], classes) if f not in node]
            if extra:
                out[path] = sorted(extra)
        for key, value in node.items():
            walk(value, f"{path}.{key}" if path else str(key))

    walk(tree, "")
    return out


def version_string(source: VerlSource) -> str | None:
    """verl's own version string (``verl/version/version``), when the source has it."""
    text = source.read("verl/version/version")
    return text.strip() if text else None


