"""verl's default configs per version, and which version a config was written for.

The trees live in ``knowledge/verl_defaults/<version>/<config>.yaml`` (generated from verl's own
YAMLs by ``scripts/generate_verl_defaults.py``); they keep verl's ``${oc.select:...}`` links, so a
user's change to a source key flows into the keys that follow it, as it does in verl.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from advisor.datafiles import derived, load_knowledge, memo
from advisor.errors import ConfigError
from advisor.spelling import close_enough, edit_distance

from . import _recipes
from ._installed import installed_verl
from ._source import dataclass_classes, default_tree, engine_configs, extra_fields, field_annotations, text_fields
from ._tree import copy_tree
from ._tree import exists as tree_exists
from ._tree import lookup as tree_lookup
from ._version import is_version, version_key

BASE_CONFIGS = ("ppo_trainer", "ppo_megatron_trainer")
# recipe config names kept for older callers -> recipe config id (every id of _recipes is accepted too)
RECIPE_CONFIGS = _recipes.ALIASES
MAIN = "0.10.0.dev"  # verl-project/verl main at the commit in versions.yaml
VERSION_ALIASES = {"main": MAIN, "head": MAIN, "master": MAIN}


@dataclass(frozen=True)
class VersionInfo:
    """One verl version the advisor holds defaults for (knowledge/verl_defaults/versions.yaml)."""

    version: str
    tag: str
    commit: str
    date: str
    configs: tuple[str, ...] = BASE_CONFIGS  # trainer configs with a default tree (one per model_engine)


@memo
def supported_versions() -> tuple[VersionInfo, ...]:
    """Supported verl versions, oldest first: those in knowledge/, plus an installed verl of another version."""
    data = load_knowledge("verl_defaults/versions.yaml")
    known = [VersionInfo(str(v["version"]), str(v["tag"]), str(v["commit"]), str(v["date"]),
                         tuple(v.get("configs") or BASE_CONFIGS)) for v in data["versions"]]
    local = installed_verl()
    if local is not None and local.version not in {v.version for v in known}:
        engines = tuple(engine_configs(local.source))
        known.append(VersionInfo(local.version, "installed", "", "", tuple(dict.fromkeys((*BASE_CONFIGS, *engines)))))
        known.sort(key=lambda v: version_key(v.version))
    return tuple(known)


def reset_caches() -> None:
    """Forget cached trees and the installed verl (tests that install a fake verl call this)."""
    for fn in (installed_verl, supported_versions, _default_container, key_index, _base_tree, _dataclass_fields,
               text_keys, _installed_tree):
        fn.cache_clear()


def version_names() -> list[str]:
    return [v.version for v in supported_versions()]


def newest_release() -> str:
    """The newest released version (not main): what a config with no telling key is read as."""
    return [v.version for v in supported_versions() if v.tag != "main"][-1]


def normalize_version(text: str) -> str:
    """Map a user's --verl-version to a supported version.

    ``0.9`` -> the newest 0.9.x; ``v0.7.1`` -> 0.7.1; ``main`` -> main's snapshot; ``latest`` -> the newest
    release; a dev or post build of a
    release (``0.9.0.dev``, ``0.3.0.post0``) or a release between two supported ones (``0.6.0``) -> the
    newest supported version at or before it; a 0.10.x build -> main (0.10.0.dev); anything else is refused.
    """
    raw = text.strip().lower().lstrip("v")
    raw = newest_release() if raw == "latest" else VERSION_ALIASES.get(raw, raw)
    names = version_names()
    if raw in names:
        return raw
    matches = [n for n in names if n.startswith(raw + ".")]
    if matches:
        return matches[-1]
    newest_series = version_key(names[-1]).release[:2]  # main's 0.10: a 0.10.x build reads as main
    if is_version(raw) and version_key(names[0]) <= version_key(raw) and \
            version_key(raw).release[:2] <= newest_series:
        base = version_key(raw).base_version  # 0.9.0.dev -> 0.9.0, a release it leads up to
        at_or_before = [n for n in names if version_key(n) <= version_key(base)] or [names[0]]
        return at_or_before[-1]
    raise ConfigError(
        f"verl version '{text}' is not supported",
        suggestion=f"use one of {', '.join(names)} (or 'main')",
    )


def engine_config(version: str, engine: str) -> str | None:
    """The trainer config that ``model_engine=<engine>`` composes in a version (None: that verl has no such
    engine). verl >= 0.7.1 selects the training engine with this config group; ``ppo_megatron_trainer.yaml`` is
    ``ppo_trainer`` with ``override model_engine: megatron`` (0.9.1 verl/trainer/config/ppo_megatron_trainer.yaml)."""
    name = {"dp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}.get(engine, f"ppo_{engine}_trainer")
    info = next((v for v in supported_versions() if v.version == version), None)
    return name if info is not None and name in info.configs else None


def _engine_configs() -> set[str]:
    return {name for v in supported_versions() for name in v.configs}


def config_base(config_name: str) -> tuple[str, str | None]:
    """(base config, recipe config id or None) for a Hydra config name. A recipe config that is a whole
    config of its own has ``ppo_trainer`` as its base here (whose dataclass fields its keys share)."""
    name = config_name.removesuffix(".yaml")
    if name in BASE_CONFIGS or name in _engine_configs():
        return name, None
    if (recipe := _recipes.resolve_config(name)) is not None:
        return _recipes.config_base(recipe) or "ppo_trainer", recipe
    raise ConfigError(
        f"config '{config_name}' is not a verl trainer config the advisor knows",
        suggestion=f"known: {', '.join(BASE_CONFIGS + tuple(RECIPE_CONFIGS))} and the recipe configs "
                   "'<recipe>/<config>' of knowledge/verl_defaults/recipes/index.yaml",
    )


def default_container(version: str, config_name: str) -> dict[str, Any]:
    """A fresh deep copy of verl's default config tree (plain dicts, interpolations kept)."""
    return copy_tree(_default_container(version, config_name))


def default_tree_view(version: str, config_name: str) -> Mapping[str, Any]:
    """verl's default config tree itself, shared and cached: for reading only (:func:`default_container` copies)."""
    return _default_container(version, config_name)


def _has_config(version: str, base: str) -> bool:
    info = next((v for v in supported_versions() if v.version == version), None)
    return base in BASE_CONFIGS or (info is not None and base in info.configs)


def _config_file(version: str, base: str) -> str:
    """The trainer config a version has for ``base``: a version without that engine's config reads as plain
    ppo_trainer (its engine keys are then unknown)."""
    return base if _has_config(version, base) else "ppo_trainer"


@cache
def _installed_tree(version: str, base: str) -> dict[str, Any] | None:
    """The installed verl's own composed tree when it is that version, else None (knowledge/ is read)."""
    local = installed_verl()
    if local is None or local.version != version:
        return None
    found = default_tree(local.source, base)
    return found[0] if found is not None else None


@memo
def _base_tree(version: str, base: str) -> dict[str, Any]:
    """verl's default tree of one version: the installed verl's own when it is that version, else knowledge/."""
    base = _config_file(version, base)
    installed = _installed_tree(version, base)
    if installed is not None:
        return installed
    return load_knowledge(f"verl_defaults/{version}/{base}.yaml")  # type: ignore[no-any-return]


@memo
def _dataclass_fields(version: str, base: str) -> dict[str, list[str]]:
    base = _config_file(version, base)
    installed, local = _installed_tree(version, base), installed_verl()
    if installed is not None and local is not None:  # (a tree is found only for an installed verl)
        return extra_fields(installed, dataclass_classes(local.source))
    return load_knowledge(f"verl_defaults/{version}/{base}.dataclass_fields.yaml") or {}


@memo
def text_keys(version: str, config_name: str) -> frozenset[str]:
    """Keys with a number default whose dataclass field admits text (``<config>.text_fields.yaml``)."""
    base = _config_file(version, config_base(config_name)[0])
    installed, local = _installed_tree(version, base), installed_verl()
    if installed is not None and local is not None:  # (a tree is found only for an installed verl)
        source = local.source
        return frozenset(text_fields(installed, dataclass_classes(source), field_annotations(source)))
    data = load_knowledge(f"verl_defaults/{version}/{base}.text_fields.yaml") or {}
    return frozenset(data.get("keys") or ())


@memo
def _default_container(version: str, config_name: str) -> dict[str, Any]:
    base, recipe = config_base(config_name)
    if recipe is None:
        return _base_tree(version, base)
    recipe_base = _recipes.config_base(recipe, version)
    return _recipes.composed(recipe, version, _base_tree(version, recipe_base) if recipe_base else None)


_LEAVES = (str, int, float, list, type(None))  # what a default tree's values are besides dicts: no ABC check needed


def iter_paths(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (dotted path, value) in a nested mapping, containers included."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        yield path, value
        if isinstance(value, dict) or (not isinstance(value, _LEAVES) and isinstance(value, Mapping)):
            yield from iter_paths(value, path + ".")


def flatten_leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys -> values (a mapping value that is empty counts as a leaf)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_leaves(value, path + "."))
        else:
            out[path] = value
    return out


@dataclass(frozen=True)
class KeyIndex:
    """The keys of one version's default config."""

    paths: frozenset[str]  # every node, containers included
    open_paths: frozenset[str]  # nodes that accept new sub-keys (empty dict or null default)
    leaves: tuple[str, ...]

    def knows(self, key: str) -> bool:
        """True if the key exists, or sits under a node whose default is an empty mapping or null."""
        if key in self.paths:
            return True
        parts = key.split(".")
        return any(".".join(parts[:i]) in self.open_paths for i in range(len(parts) - 1, 0, -1))

    def closest(self, key: str, limit: int = 3) -> list[str]:
        """Known keys a typo most likely meant, nearest first (``advisor.spelling``: edit distance with a cut-off).

        A candidate's leaf and its section are each within the cut-off of the key's (``rollout.temprature``:
        ``rollout.temperature``, never ``rollout.qat``); ranked by the edits of both. When none is that close,
        the same leaf in another section (a key written under the wrong parent).
        """
        parent, _, leaf = key.rpartition(".")
        parents: dict[str, int | None] = {}
        ranked: list[tuple[int, str]] = []
        moved: list[tuple[int, str]] = []
        for cand in self.leaves:
            if cand == key:
                continue
            cand_parent, _, cand_leaf = cand.rpartition(".")
            if cand_leaf == leaf:
                moved.append((edit_distance(parent, cand_parent), cand))
            if abs(len(cand_leaf) - len(leaf)) * 6 > len(cand_leaf) + len(leaf) + 3:
                continue  # too different in length to be within the cut-off
            leaf_edits = edit_distance(leaf, cand_leaf)
            if not close_enough(leaf, cand_leaf, leaf_edits):
                continue
            if cand_parent not in parents:
                edits = edit_distance(parent, cand_parent)
                parents[cand_parent] = edits if close_enough(parent, cand_parent, edits) else None
            if (parent_edits := parents[cand_parent]) is not None:
                ranked.append((leaf_edits + parent_edits, cand))
        return [k for _, k in sorted(ranked or moved)[:limit]]


# Free-form mappings verl hands to another library (Megatron's TransformerConfig, torch optimizers,
# vLLM/SGLang engine args, reward functions): any sub-key is legitimate.
_PASS_THROUGH = re.compile(r"(^|\.)(override_\w+|\w*kwargs|engine_kwargs\.\w+)$")


@cache
def key_index(version: str, config_name: str) -> KeyIndex:
    """Every key of a version's defaults, plus the keys verl reads that its YAML does not list:
    dataclass fields (``<config>.dataclass_fields.yaml``) and ``knowledge/extra_keys.yaml``. Kept in the
    knowledge cache (``advisor.datafiles.derived``): walking every tree costs most of ``check``'s start-up."""
    if knowledge_only(version):
        paths, open_paths, leaves = derived(f"key_index/{version}/{config_name}",
                                            lambda: _key_index_data(version, config_name), __file__)
    else:  # an installed verl's own tree: not a knowledge file, so not cached
        paths, open_paths, leaves = _key_index_data(version, config_name)
    return KeyIndex(paths, open_paths, leaves)


def knowledge_only(version: str) -> bool:
    """Whether this version's trees come from knowledge/ alone (not from an installed verl of that version)."""
    local = installed_verl()
    return local is None or local.version != version


def _key_index_data(version: str, config_name: str
                    ) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    tree = _default_container(version, config_name)
    paths: set[str] = set()
    open_paths: set[str] = set()
    for path, value in iter_paths(tree):
        paths.add(path)
        if value is None or (isinstance(value, Mapping) and not value) or (
                isinstance(value, Mapping) and _PASS_THROUGH.search(path)):
            open_paths.add(path)
    base, _ = config_base(config_name)
    fields = _dataclass_fields(version, base)
    extra = [f"{node}.{name}" for node, names in fields.items() for name in names]
    extra += [entry["key"] for entry in load_knowledge("extra_keys.yaml")["keys"]]
    paths.update(extra)
    open_paths.update(extra)  # their sub-keys are free-form
    return frozenset(paths), frozenset(open_paths), tuple(sorted(flatten_leaves(tree)))


def known_in_versions(key: str, config_name: str) -> list[str]:
    return [v for v in version_names() if key_index(v, config_name).knows(key)]


def detect_version(keys: Iterable[str], config_name: str, *, full_dump: bool = False,
                   changed: Iterable[str] = (), added: Iterable[str] = (),
                   removed: Callable[[str, str], bool] | None = None) -> str:
    """The verl version whose defaults best explain a config's keys.

    Each version's key set is its fingerprint: prefer the version that knows every key the user set
    (a key added in 0.9.0 rules out 0.8.0; a key 0.4 removed rules out 0.4 and later), and in whose tree every
    key set without '+' (``changed``) already exists and no key added with '+' (``added``) does, as Hydra
    requires; ``removed(key, version)`` marks a key that version removed (a config dataclass may still list a
    field its YAML dropped: verl 0.7's FSDP config has ``grad_offload``, which no 0.7 script sets); for a full
    Hydra dump also prefer the one whose own keys the dump contains (a dump from 0.6.1 lacks keys 0.7.0 added).
    Ties go to the newest release, then to main (a config that needs nothing newer is most likely run on a
    release).
    """
    keys, changed, added = list(keys), list(changed), list(added)
    best: tuple[tuple[Any, ...], str] | None = None
    for info in supported_versions():
        index = key_index(info.version, config_name)
        unknown = len(_conflicts(keys, config_name, info.version, changed, added, removed))
        missing = 0
        if full_dump:
            present = set(keys)
            missing = sum(1 for leaf in index.leaves if leaf not in present)
        score = (-unknown, -missing, info.tag != "main", version_key(info.version))
        if best is None or score > best[0]:
            best = (score, info.version)
    assert best is not None
    return best[1]


def _conflicts(keys: list[str], config_name: str, version: str, changed: list[str], added: list[str],
               removed: Callable[[str, str], bool] | None) -> list[str]:
    """The keys that count against one version (each occurrence): unknown to it, set without '+' where its tree
    lacks them, added with '+' over a value it has, or removed by it."""
    index = key_index(version, config_name)
    tree = _default_container(version, config_name)
    out = [k for k in keys if not index.knows(k)]
    out += [k for k in changed if index.knows(k) and not tree_exists(tree, k)]
    out += [k for k in added if tree_exists(tree, k) and _set_value(tree_lookup(tree, k))]
    if removed is not None:
        out += [k for k in keys if index.knows(k) and removed(k, version)]
    return out


def version_conflicts(keys: Iterable[str], config_name: str, version: str, *, changed: Iterable[str] = (),
                      added: Iterable[str] = (), removed: Callable[[str, str], bool] | None = None) -> tuple[str, ...]:
    """The keys of a config that ``version`` would not take, by the rules :func:`detect_version` scores with
    (each key once): what rules that version out, or what it would reject."""
    return tuple(dict.fromkeys(_conflicts(list(keys), config_name, version, list(changed), list(added), removed)))


def _set_value(raw: Any) -> bool:
    """A default that '+key=' collides with (Hydra refuses it; ``_config._apply``'s L006): a plain value, not
    null, a mapping or a link whose target the user may have left empty."""
    return raw is not None and not isinstance(raw, Mapping) and not (isinstance(raw, str) and "${" in raw)

