"""Load any verl config into one tree: verl's defaults for the right version, plus what the user set.

Inputs, all resolving to a :class:`VerlConfig`:

- a Hydra-dumped full config (``outputs/<date>/<time>/.hydra/config.yaml``, or its run directory);
- a partial YAML holding only the keys the user set (optionally with a ``defaults:`` list);
- a launch script (``.sh``) that runs verl with Hydra overrides (see ``_script``);
- extra ``KEY=VALUE`` overrides after the file (last wins).

Overrides are parsed with Hydra's grammar and applied with Hydra's semantics (``key=`` must exist,
``+key=`` must not, ``++key=`` either, ``~key`` deletes) onto verl's defaults (plain dicts, see
``_tree``), and every ``${oc.select:...}`` link resolves as OmegaConf resolves it in verl. What verl
would reject at load time (unknown keys, removed keys) becomes a finding, not an exception, so the
rest can still be checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor import codes
from advisor.datafiles import load_knowledge
from advisor.errors import ConfigError
from advisor.findings import Change, Finding, Severity
from advisor.inputfile import binary_kind, decode_text, read_capped, read_text, utf16_bom
from advisor.spelling import likely_typo
from advisor.verl import (
    ALIASES,
    BASE_CONFIGS,
    MISSING_VALUE,
    Deprecation,
    EntryPoint,
    MissingKey,
    Override,
    OverrideKind,
    Resolver,
    Unresolvable,
    at_least,
    config_base,
    config_in_recipe,
    config_source,
    copy_tree,
    deep_merge,
    default_container,
    detect_version,
    engine_config,
    flatten_leaves,
    foreign_key,
    inert_resolvers,
    installed_verl,
    key_index,
    known_in_versions,
    newest_release,
    normalize_version,
    parse_override,
    read_key,
    removed_by,
    render_value,
    supported_versions,
    text_keys,
    version_names,
)
from advisor.verl import delete as tree_delete
from advisor.verl import exists as tree_exists
from advisor.verl import lookup as lookup_deprecation
from advisor.verl import update as tree_update

from ._limits import MAX_BYTES
from ._reads import note_read
from ._script import COMMAND_SUBSTITUTION, LaunchCommand, parse_launch_script, unknown_branch_variable

if TYPE_CHECKING:
    from omegaconf import DictConfig

_MISSING = object()
_MAX_UNKNOWN_KEYS = 200  # unknown keys reported one by one (with did-you-mean); the rest in one line
# Keys under these roots belong to the advisor's own tools (the sandbox trainer), not to verl.
_TOOL_NAMESPACES = ("sandbox.",)


@dataclass
class UserSetting:
    """One key the user set, where, and how."""

    key: str
    value: Any
    where: str | None = None  # "run.sh:42" / "config.yaml" / "command line"
    kind: OverrideKind = OverrideKind.CHANGE


@dataclass
class VerlConfig:
    """A verl config resolved against the defaults of one verl version.

    ``container`` holds the merged config as plain nested dicts with verl's interpolations kept;
    :meth:`get` resolves them as OmegaConf (and so verl) does. ``tree`` gives the same config as an
    OmegaConf DictConfig when a caller needs one.
    """

    container: dict[str, Any]
    version: str
    config_name: str
    path: str | None = None
    kind: str = "yaml"  # "script" | "hydra-dump" | "yaml" | "defaults"
    settings: list[UserSetting] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    launch: LaunchCommand | None = None
    version_detected: bool = True
    version_installed: str | None = None  # the folder of the installed verl whose own defaults were read
    entry: EntryPoint | None = None  # the recipe or verl entry point a launch script runs (its trainer facts)
    from_log: Any = None  # a console log's PrintedConfig (advisor.load._from_log) when read from one
    source_sha256: str | None = None  # of the file's bytes as the analysis read them (--write refuses a later save)

    def get(self, key: str, default: Any = None) -> Any:
        """The resolved value at a dotted key (containers come back as plain dicts/lists)."""
        note_read(key)
        try:
            return Resolver(self.container, inert=True).value(key)
        except (KeyError, MissingKey):
            return default
        except Unresolvable:
            return self._omegaconf_get(key, default)

    def _omegaconf_get(self, key: str, default: Any) -> Any:
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        try:
            tree = OmegaConf.create(inert_resolvers(self.container))
            value = OmegaConf.select(tree, key, default=_MISSING, throw_on_missing=False)
            if OmegaConf.is_config(value):
                value = OmegaConf.to_container(value, resolve=True)
        except (OmegaConfBaseException, RecursionError):
            return default
        return default if value is _MISSING else value

    @property
    def tree(self) -> DictConfig:
        """The config as an OmegaConf DictConfig (built on first use)."""
        from omegaconf import OmegaConf

        return OmegaConf.create(self.container)

    def has(self, key: str) -> bool:
        note_read(key)
        return tree_exists(self.container, key)

    @property
    def user_keys(self) -> dict[str, Any]:
        """Dotted keys the user set -> the value they gave (last setting wins)."""
        return {s.key: s.value for s in self.settings if s.kind is not OverrideKind.DELETE}

    def where(self, key: str) -> str | None:
        for s in reversed(self.settings):
            if s.key == key:
                return s.where
        return None

    def with_changes(self, changes: Iterable[Change]) -> VerlConfig:
        """A copy with the changes applied (as ``key=value``/``++key=value``/``~key`` would be)."""
        container = copy_tree(self.container)
        settings = list(self.settings)
        findings = list(self.findings)
        for change in changes:
            if change.renames:  # the misspelt key goes, and with it what was reported about it
                if tree_exists(container, change.renames):
                    tree_delete(container, change.renames)
                settings = [s for s in settings if s.key != change.renames]
                findings = [f for f in findings if f.keys[:1] != (change.renames,)]
            if change.delete:
                tree_delete(container, change.key)
                settings.append(UserSetting(change.key, None, "advisor", OverrideKind.DELETE))
            else:
                tree_update(container, change.key, change.new, merge=False)
                settings.append(UserSetting(change.key, change.new, "advisor"))
        return replace(self, container=container, settings=settings, findings=findings)

    def to_yaml(self) -> str:
        from omegaconf import OmegaConf

        return OmegaConf.to_yaml(self.tree, sort_keys=False)


# ---------------------------------------------------------------------------------------------
# Reading the input


def load_config(
    source: str | Path | None,
    overrides: Sequence[str] = (),
    *,
    verl_version: str | None = None,
    config_name: str = "ppo_trainer",
    script_vars: Mapping[str, str] | None = None,
) -> VerlConfig:
    """Load a config file, launch script or Hydra run directory (or just defaults when None).

    Args:
        source: path to a YAML config, a Hydra ``.hydra/config.yaml`` (or the run directory holding
            ``.hydra/``), or a ``.sh`` launch script. None means verl's defaults.
        overrides: extra Hydra overrides applied last (``key=value``, ``+key=value``, ``~key``).
        verl_version: force a version (``0.7.0``, ``main``, ...) instead of detecting it.
        config_name: the trainer config when ``source`` is None (``ppo_megatron_trainer``, ...).
        script_vars: variables the launch environment of a script holds (``--set-var DEVICE=gpu``).

    Raises:
        ConfigError: the input cannot be read (missing, binary, malformed, no verl command, ...).
    """
    version = normalize_version(verl_version) if verl_version else None
    local = installed_verl() if version is None else None
    if local is not None:
        version = local.version  # the exact verl the user runs, its own config YAMLs
    cli = [parse_override(o, path="command line") for o in overrides]
    if source is None:
        detected = version is None
        base, recipe = config_base(config_name)
        config_name = recipe or base
        engine = _engine_choice(cli, {})
        keys = [o.key for o in cli if o.kind is OverrideKind.CHANGE]
        version = version or detect_version(keys, _engine_config_for(config_name, engine, None), changed=keys)
        config_name = _engine_config_for(config_name, engine, version)
        cfg = _build(None, "defaults", config_name, {}, [], cli, version, launch=None)
        cfg.version_detected = detected
        cfg.version_installed = str(local.root) if local is not None else None
        return cfg

    path = _resolve_path(Path(source))
    text, digest = _read_source(path)
    cfg = _from_text(path, text, cli, version, script_vars)
    cfg.version_installed = str(local.root) if local is not None else None
    cfg.source_sha256 = digest
    return cfg


def load_config_text(text: str, path: str | Path, overrides: Sequence[str] = (), *, verl_version: str,
                     script_vars: Mapping[str, str] | None = None) -> VerlConfig:
    """The config a file at ``path`` would give if it held ``text`` (an edit not yet written: ``--write`` reads
    its result back before it writes), on the defaults of ``verl_version``."""
    cli = [parse_override(o, path="command line") for o in overrides]
    return _from_text(Path(path), text, cli, verl_version, script_vars)


def _from_text(path: Path, text: str, cli: list[Override], version: str | None,
               script_vars: Mapping[str, str] | None = None) -> VerlConfig:
    if _is_script(path, text):
        launch = parse_launch_script(text, str(path), script_vars)
        return _from_launch(path, launch, cli, version)
    return _from_yaml(path, text, cli, version)


def _resolve_path(path: Path) -> Path:
    if path.is_dir():
        for candidate in (path / ".hydra" / "config.yaml", path / "config.yaml"):
            if candidate.is_file():
                return candidate
        raise ConfigError("is a directory without .hydra/config.yaml", path=str(path),
                          suggestion="pass a config YAML, a Hydra run directory or a launch script")
    if not path.exists():
        raise ConfigError("file not found", path=str(path))
    return path


def _read_text(path: Path) -> str:
    return _read_source(path)[0]


def _read_source(path: Path) -> tuple[str, str]:
    """The text of a config or launch script, and the SHA-256 of its bytes."""
    try:  # CPython's builtin SHA-256: hashlib would load OpenSSL's _hashlib first (~2 ms of suggest's start-up)
        from _sha256 import sha256  # Python 3.11
    except ImportError:  # pragma: no cover - 3.12 renamed it; other interpreters: hashlib's
        try:
            from _sha2 import sha256
        except ImportError:
            from hashlib import sha256

    # a regular file, read with a byte cap (st_size is 0 for /dev/zero, which never ends; a FIFO blocks)
    data = read_capped(path, MAX_BYTES, ConfigError, "verl config or launch script")
    digest = sha256(data).hexdigest()
    if (what := binary_kind(data[:16])) is not None:
        raise ConfigError(f"is {what}", path=str(path))
    if utf16_bom(data) is None and b"\x00" in data[:8192]:
        raise ConfigError("is a binary file, not a verl config or launch script", path=str(path))
    text = decode_text(data, path, ConfigError, "text, not a verl config or launch script")
    if not text.strip():
        raise ConfigError("is empty", path=str(path), suggestion="pass a verl config YAML or a launch script")
    return text, digest


_SCRIPT_HINT = re.compile(r"(^#!.*\b(ba|z|k)?sh\b)|(\bpython3?\s+(-\S+\s+)*-m\s+\w)|(\bmain_ppo\b)", re.M)


def _is_script(path: Path, text: str) -> bool:
    if path.suffix in (".sh", ".bash", ".zsh"):
        return True
    if path.suffix in (".yaml", ".yml", ".json"):
        return False
    return bool(_SCRIPT_HINT.search(text[:4000]))


def _looks_like_metrics(text: str) -> bool:
    head = text.lstrip()[:2000]
    return bool(re.match(r'\{\s*"step"\s*:', head) or re.search(r"(^|\)\s*)step:\d+ - ", head, re.M)
                or head.startswith("_step,") or "\n{\"step\"" in head)


def _read_yaml_config(path: Path, text: str, version: str | None = None
                      ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, int]]:
    """(trainer config its ``defaults`` compose from, its keys as a tree, its keys as leaves, the line of each
    key) of a config YAML."""
    if _looks_like_metrics(text):
        raise ConfigError("looks like a metrics log, not a verl config", path=str(path),
                          suggestion="pass the config first: advisor suggest CONFIG METRICS")
    from ._safe_yaml import load_yaml_with_lines  # lazy: a launch script needs no YAML parser

    data, lines = load_yaml_with_lines(text, path=str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"is a YAML {type(data).__name__}, not a mapping of verl config keys",
                          path=str(path))
    data = {str(k): v for k, v in data.items()}
    from ._other_tools import other_tool_config

    if (other := other_tool_config(data, str(path))) is not None:
        raise other
    config_name = _config_name_from_defaults(data.pop("defaults", None), path)
    data.pop("hydra", None)
    leaves = flatten_leaves(data)
    return _dapo_guess(config_name, leaves, version), data, leaves, lines


def _yaml_setting(key: str, value: Any, path: Path, lines: Mapping[str, int]) -> UserSetting:
    """A key the YAML sets, placed at its line (``ppo.yaml:13``) as a script's override is."""
    line = lines.get(key)
    return UserSetting(key, value, f"{path}:{line}" if line else str(path))


_DAPO_KEYS = ("algorithm.filter_groups", "reward_model.overlong_buffer", "reward.reward_kwargs.overlong_buffer_cfg")


def _dapo_guess(config_name: str, leaves: Iterable[str], version: str | None) -> str:
    """A YAML composed on verl's trainer config that sets the DAPO recipe's own keys is a DAPO run, unless the
    core config of its verl version has those keys (``algorithm.filter_groups`` is core in verl >= 0.8)."""
    keys = [k for k in leaves if k.startswith(_DAPO_KEYS)]
    if not keys or config_name not in BASE_CONFIGS:
        return config_name
    versions = [version] if version else version_names()
    if any(all(key_index(v, config_name).knows(k) for k in keys) for v in versions):
        return config_name
    return ALIASES[config_name.replace("ppo", "dapo")]


def _from_yaml(path: Path, text: str, cli: list[Override], version: str | None) -> VerlConfig:
    config_name, data, leaves, lines = _read_yaml_config(path, text, version)
    kind = "yaml"
    dump_overrides: list[Override] | None = None
    if path.name == "config.yaml" and path.parent.name == ".hydra":
        kind = "hydra-dump"
        dump_overrides = _hydra_overrides(path.parent / "overrides.yaml")

    engine = _engine_choice(cli, leaves)
    if version is None:
        probe = _engine_config_for(config_name, engine, None)
        full = kind == "hydra-dump" or len(leaves) > 0.6 * len(key_index(newest_release(), probe).leaves)
        cli_keys = [o.key for o in cli if o.kind is OverrideKind.CHANGE]
        version = detect_version([*leaves, *cli_keys], probe, full_dump=full)
        detected = True
    else:
        detected = False
    config_name = _engine_config_for(config_name, engine, version)

    if kind == "hydra-dump" and len(leaves) > 0.6 * len(key_index(version, config_name).leaves):
        # A full dump: the user's own settings are in overrides.yaml, or else what differs from defaults.
        defaults = flatten_leaves(default_container(version, config_name))
        if dump_overrides is not None:
            user_keys = {o.key for o in dump_overrides}
            yaml_settings = {k: v for k, v in leaves.items() if k in user_keys or k not in defaults}
        else:
            yaml_settings = {k: v for k, v in leaves.items() if defaults.get(k, _MISSING) != v}
    else:
        yaml_settings = leaves
    cfg = _build(path, kind, config_name, data, [_yaml_setting(k, v, path, lines) for k, v in yaml_settings.items()],
                 cli, version, launch=None)
    cfg.version_detected = detected
    return cfg


# Hydra's own settings (hydra.searchpath=[pkg://...], hydra.run.dir=...): not verl keys, nothing to check.
_HYDRA_SETTINGS = ("hydra.",)


def _engine_choice(overrides: Iterable[Override], yaml_leaves: Mapping[str, Any]) -> str | None:
    """The ``model_engine`` the user chose (``model_engine=megatron``, last wins), or None."""
    choice = yaml_leaves.get("model_engine")
    for o in overrides:
        if o.key == "model_engine" and o.kind is not OverrideKind.DELETE:
            choice = o.value
    return choice if isinstance(choice, str) and choice.isidentifier() else None


def _engine_config_for(config_name: str, engine: str | None, version: str | None) -> str:
    """The trainer config a ``model_engine`` choice composes on top of ppo_trainer (verl >= 0.7.1), in a version,
    or in any version while the version is still being detected."""
    if engine is None or config_name != "ppo_trainer":
        return config_name
    if version is not None:
        return engine_config(version, engine) or config_name
    name = {"dp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}.get(engine, f"ppo_{engine}_trainer")
    try:
        config_base(name)
    except ConfigError:
        return config_name
    return name


def _config_name_from_defaults(defaults: Any, path: Path) -> str:
    if defaults is None:
        return "ppo_trainer"
    entries = defaults if isinstance(defaults, list) else [defaults]
    for entry in entries:
        name = entry if isinstance(entry, str) else None
        if isinstance(entry, dict) and len(entry) == 1:
            (k, v), = entry.items()
            name = v if k in ("override", "_self_") else (k if v is None else None)
        if isinstance(name, str) and name != "_self_":
            try:
                config_base(name)
                return name.removesuffix(".yaml")
            except ConfigError:
                continue
    raise ConfigError("its 'defaults' list names no verl trainer config", path=str(path),
                      suggestion="compose from ppo_trainer or ppo_megatron_trainer")


def _hydra_overrides(path: Path) -> list[Override] | None:
    if not path.is_file():
        return None
    try:
        text = read_text(path, MAX_BYTES, ConfigError, "Hydra overrides file")
    except ConfigError:
        return None
    from ._safe_yaml import load_yaml

    lines = load_yaml(text, path=str(path))
    if not isinstance(lines, list):
        return None
    out = []
    for line in lines:
        try:
            out.append(parse_override(str(line), path=str(path)))
        except ConfigError:
            continue
    return out


def _from_launch(path: Path, launch: LaunchCommand, cli: list[Override], version: str | None) -> VerlConfig:
    entry = launch.entry
    recipe_config = _recipe_config_name(launch, entry)
    user_yaml = None if recipe_config else _user_config_file(path, launch)
    yaml_data: dict[str, Any] = {}
    yaml_leaves: dict[str, Any] = {}
    yaml_lines: dict[str, int] = {}
    if user_yaml is not None:
        config_name, yaml_data, yaml_leaves, yaml_lines = _read_yaml_config(user_yaml, _read_text(user_yaml), version)
        launch.notes.append(f"--config-name={launch.config_name}: read {user_yaml} (composed on verl's {config_name})")
    else:
        config_name = recipe_config or _launch_config_name(path, launch, entry)
    parsed: list[tuple[Override, str]] = []
    invalid: list[Finding] = []
    for text, line in zip(launch.overrides, launch.override_lines, strict=True):
        where = f"{path}:{line}"
        try:
            parsed.append((parse_override(text, path=str(path), where=line), where))
        except ConfigError as err:
            key, sep, value = text.partition("=")
            if sep and _depends_on_unresolved(launch, key.lstrip("+~")):
                # a value built from an undefined variable or $(...): keep it as the literal text
                parsed.append((parse_override(f"{key}={render_value(value)}", path=str(path), where=line),
                               where))
            else:
                invalid.append(_invalid_override(text, err, where))
    keys = [*yaml_leaves, *(o.key for o, _ in parsed + [(o, "") for o in cli] if o.kind is OverrideKind.CHANGE)]
    unseen = group_packages([o for o, _ in parsed] + cli)
    keys = [k for k in keys if not k.startswith((*_HYDRA_SETTINGS, *unseen))]
    engine = _engine_choice([o for o, _ in parsed] + cli, yaml_leaves)
    detected = version is None
    window = _pinned_versions(entry) if version is None and entry is not None else []
    if version is None:
        changed = [o.key for o, _ in parsed if o.kind is OverrideKind.CHANGE
                   and not o.key.startswith((*_HYDRA_SETTINGS, *unseen))]
        added = [o.key for o, _ in parsed if o.kind is OverrideKind.ADD and not isinstance(o.value, (dict, list))]
        probe = _engine_config_for(config_name, engine, None)
        version = detect_version(keys, probe, changed=changed, added=added,
                                 removed=partial(removed_by, config_name=probe))
    config_name = _engine_config_for(config_name, engine, version)
    if window and entry is not None and entry.verl_pin:  # a window comes only from a recipe's pin
        version = _prefer_pinned(keys, config_name, window, version)
        pin = entry.verl_pin
        launch.notes.append(f"{entry.module} is tested with verl {pin['version']} @ {pin['commit'][:9]} "
                            f"({pin['date']}, {pin['source']}); read as verl {version}")
    yaml_settings = [_yaml_setting(k, v, user_yaml, yaml_lines) for k, v in yaml_leaves.items()] \
        if user_yaml is not None else []
    cfg = _build(path, "script", config_name, yaml_data, yaml_settings, [*(o for o, _ in parsed), *cli], version,
                 launch=launch, wheres=[w for _, w in parsed] + ["command line"] * len(cli), entry=entry)
    cfg.findings[:0] = invalid
    cfg.version_detected = detected
    if config_name not in BASE_CONFIGS and entry is not None and entry.recipe is not None:
        launch.notes.append(f"{entry.module} runs recipe config {config_name} "
                            f"({config_source(version, config_name)})")
    return cfg


def _pinned_versions(entry: EntryPoint) -> list[str]:
    """The supported versions around the verl a recipe is tested with: that release, or the releases dated just
    before and just after its commit (a main commit sits between two)."""
    pin = entry.verl_pin
    if not pin:
        return []
    infos = sorted((i for i in supported_versions() if i.date), key=lambda i: i.date)  # not an undated install
    exact = [i.version for i in infos if i.commit == pin["commit"] or i.tag == pin.get("tag")]
    if exact:
        return exact
    before = [i.version for i in infos if i.date <= pin["date"]][-1:]
    after = [i.version for i in infos if i.date > pin["date"]][:1]
    return before + after


def _prefer_pinned(keys: Sequence[str], config_name: str, window: Sequence[str], detected: str) -> str:
    """Of the versions that know the most of the keys, the oldest in the pinned window (the release the pinned
    commit builds on: what the next release added or removed may postdate it); the detected version when the
    keys fit no pinned version as well (a script written for an older release of the recipe)."""
    def unknown(v: str) -> int:
        return sum(1 for k in keys if not key_index(v, config_name).knows(k))

    best = unknown(detected)
    return next((v for v in window if unknown(v) <= best), detected)


def _recipe_config_name(launch: LaunchCommand, entry: EntryPoint | None) -> str | None:
    """The recipe config a launch composes: ``--config-name`` picks one of the recipe's configs, from the
    recipe folder that ``--config-path`` names (``$PWD/recipe/qat/config``) or else the entry point's own."""
    named = re.search(r"(?:^|/)recipe/([\w/]+?)/config/?$", launch.config_path or "")
    if launch.config_name:
        for recipe in (named.group(1) if named else None, entry.recipe if entry else None):
            if recipe and (found := config_in_recipe(recipe, launch.config_name)):
                return found
        return None
    return entry.config if entry is not None and entry.recipe is not None else None


def _invalid_override(text: str, err: ConfigError, where: str) -> Finding:
    if not text.strip():
        message = (f"argument {text!r} is not a Hydra override: a backslash followed by a space ends "
                   "the command there, so the lines after it never reach verl")
    elif re.search(r"=<[^>]+>$", text):
        message = f"'{text}' is a template placeholder; fill in a real value (bash reads '<...>' as a redirection)"
    else:
        message = f"argument {text!r} is not a valid Hydra override; verl would refuse to start"
    return codes.INVALID_OVERRIDE.finding(message, (), where=where, details={"parser": err.message})


def _depends_on_unresolved(launch: LaunchCommand, key: str) -> bool:
    return any(key in keys for keys in launch.unresolved.values())


def _user_config_file(path: Path, launch: LaunchCommand) -> Path | None:
    """The user's own config YAML that ``--config-path``/``--config-name`` name, when it is not one of verl's
    trainer configs and can be found: the path as written (relative to the script's folder or the working
    directory), or, when it starts with something the script cannot resolve (``$(pwd)/examples/x/config``),
    its literal tail under the script's folder or any folder above it (scripts say "run from the project
    root"). None when the name is one of verl's configs or nothing is found."""
    if not launch.config_name:
        return None
    name = launch.config_name.removesuffix(".yaml")
    try:
        config_base(name)
        return None  # one of verl's own configs
    except ConfigError:
        pass
    raw = launch.config_path or "."
    here = [path.parent, *path.parent.parents]
    if "$" in raw:
        # the literal tail after the last unresolved part: "$PROJECT_DIR/examples/x/config" -> "examples/x/config"
        after = raw.rsplit("$", 1)[1]
        tail = after.split("/", 1)[1] if "/" in after else ""
        bases = [folder / tail for folder in here]
    elif Path(raw).is_absolute():
        bases = [Path(raw)]
    else:
        bases = [Path.cwd() / raw, *(folder / raw for folder in here)]
    if "recipe/" in raw:  # verl-recipe checked out on its own is verl's recipe/ folder: ".../recipe/deepeyes/configs"
        inside = raw.rsplit("recipe/", 1)[1]
        bases += [folder / inside for folder in here]
    for base in bases:
        candidate = base / f"{name}.yaml"
        try:
            if candidate.is_file():
                return candidate
        except (OSError, ValueError):  # a name the OS refuses (too long, a NUL byte): not a file the script has
            continue
    return None


def _launch_config_name(path: Path, launch: LaunchCommand, entry: EntryPoint | None = None) -> str:
    if entry is not None and entry.recipe is not None and not launch.config_name:
        # its @hydra.main names a config its folder lacks: Hydra cannot start
        raise ConfigError(f"{entry.module}'s @hydra.main ({entry.hydra_main}) names a config that its recipe's "
                          "config/ folder does not hold; Hydra cannot start it without --config-name",
                          path=str(path), where=launch.line, suggestion="pass --config-name with one of "
                          f"recipe {entry.recipe}'s configs")
    if launch.config_name:
        name = launch.config_name.removesuffix(".yaml")
        try:
            config_base(name)
            return name
        except ConfigError:
            raise ConfigError(
                f"--config-name={launch.config_name} is neither one of verl's trainer configs nor a YAML found "
                f"under --config-path={launch.config_path or '(none)'}",
                path=str(path), where=launch.line,
                suggestion="run the advisor from the folder the script expects to run in, or pass that YAML "
                           "as the config and the script's overrides after it",
            ) from None
    if entry is not None and entry.config:
        return entry.config  # verl's own entry point (main_ppo: ppo_trainer)
    if launch.entry_point.startswith("recipe.dapo."):
        return ALIASES["dapo_trainer"]  # a fork's DAPO entry point
    return "ppo_trainer"


# ---------------------------------------------------------------------------------------------
# Building the tree


def _build(
    path: Path | None,
    kind: str,
    config_name: str,
    yaml_data: Mapping[str, Any],
    yaml_settings: list[UserSetting],
    overrides: list[Override],
    version: str,
    *,
    launch: LaunchCommand | None,
    wheres: list[str] | None = None,
    entry: EntryPoint | None = None,
) -> VerlConfig:
    tree = default_container(version, config_name)
    if yaml_data:
        deep_merge(tree, yaml_data)
    index = key_index(version, config_name)
    findings: list[Finding] = []
    settings = list(yaml_settings)
    beyond: list[str] = []  # unknown keys past the cap: summarised, so a 40,000-key file stays fast and short
    listed = 0

    # every key the user sets: "did you mean" never renames a key onto one of these (a second override of it)
    taken = frozenset([*(s.key for s in yaml_settings), *(o.key for o in overrides)])

    def unknown_key(key: str, version: str, config_name: str, where: str | None, plus_ok: bool = False,
                    value: Any = _MISSING) -> Finding | None:
        nonlocal listed
        if listed >= _MAX_UNKNOWN_KEYS:
            beyond.append(key)
            return None
        listed += 1
        return _unknown_key(key, version, config_name, where, plus_ok, value, taken)

    for s in yaml_settings:
        if not index.knows(s.key):
            finding = unknown_key(s.key, version, config_name, s.where, value=s.value)
            if finding is not None:
                findings.append(finding)
    wheres = wheres or ["command line"] * len(overrides)
    rejected: list[UserSetting] = []
    unseen = group_packages(overrides)  # subtrees composed from config-group options the advisor cannot see
    for override, where in zip(overrides, wheres, strict=True):
        if override.key.startswith(_HYDRA_SETTINGS):
            continue  # Hydra's own settings, not verl's config
        if override.group is not None:
            findings.append(_group_choice(override, where, overrides))
            continue
        setting = UserSetting(override.key, override.value, where, override.kind)
        if override.kind is not OverrideKind.DELETE and override.key.startswith(unseen):
            tree_update(tree, override.key, override.value, merge=True)  # its defaults are not known here
            settings.append(setting)
            continue
        finding = _apply(tree, override, index, version, config_name, where, unknown_key)
        if finding is not None:
            findings.append(finding)
            if finding.severity == "error":
                rejected.append(setting)
                continue
        settings.append(setting)
    if beyond:
        shown = ", ".join(f"'{k}'" for k in beyond[:3])
        findings.append(codes.UNKNOWN_KEY.finding(
            f"{len(beyond):,} more keys are not in verl {version} defaults either ({shown}, ...); only the first "
            f"{_MAX_UNKNOWN_KEYS} are listed one by one", (beyond[0],), details={"more_keys": len(beyond)}))
    cfg = VerlConfig(container=tree, version=version, config_name=config_name,
                     path=str(path) if path else None, kind=kind, settings=settings, launch=launch, entry=entry)
    findings.extend(_deprecations(cfg, rejected, frozenset(beyond)))
    findings.extend(_type_mismatches(cfg))
    if launch is not None:
        findings.extend(_script_findings(launch, str(path)))
    findings = [replace(f, fix=tuple(replace(c, old=cfg.get(c.key)) for c in f.fix))
                if f.id == codes.UNKNOWN_KEY.id else f for f in findings]
    # A renamed or removed key's finding (with its successor) explains it better than the generic ones.
    explained = {k for f in findings if f.id in (codes.REMOVED_KEY.id, codes.DEPRECATED_KEY.id) for k in f.keys}
    cfg.findings = [f for f in findings
                    if not (f.id in (codes.UNKNOWN_KEY.id, codes.ADDED_KEY_UNREAD.id) and f.keys[0] in explained)]
    return cfg


def group_packages(overrides: Iterable[Override]) -> tuple[str, ...]:
    """Package paths (with a trailing dot) that a config-group choice replaces (``actor@actor_rollout_ref.actor=
    mlite_actor``): the option's file is not in verl's config tree the advisor has, so keys under it are unchecked."""
    return tuple(f"{o.key}." for o in overrides if o.group is not None)


def _group_choice(override: Override, where: str, overrides: Sequence[Override]) -> Finding:
    search = [o.value for o in overrides if o.key == "hydra.searchpath"]
    origin = f" (looked up on hydra.searchpath {render_value(search[-1])})" if search else ""
    return codes.CONFIG_GROUP_CHOICE.finding(
                   f"'{override.text}' composes {override.key} from the '{override.group}' config group's option "
                   f"'{override.value}'{origin}, which the advisor cannot see: the keys under {override.key} are "
                   "not checked", (override.key,),
                   where=where, details={"group": override.group, "option": override.value})


def _apply(tree: dict[str, Any], override: Override, index: Any, version: str, config_name: str,
           where: str, unknown_key: Callable[..., Finding | None] | None = None) -> Finding | None:
    """Apply one override with Hydra's semantics; return a finding for what Hydra would reject."""
    key, exists = override.key, tree_exists(tree, override.key)
    if override.kind is OverrideKind.DELETE:
        if not exists:
            return codes.DELETE_MISSING_KEY.finding(
                f"'~{key}' deletes a key that is not in the config; Hydra refuses it", (key,), where=where)
        tree_delete(tree, key)
        return None
    if override.kind is OverrideKind.CHANGE and not exists:
        return (unknown_key or _unknown_key)(key, version, config_name, where, plus_ok=index.knows(key),
                                             value=override.value)
    current = _resolved_or_none(tree, key) if exists else None
    if override.kind is OverrideKind.ADD and current is not None and not isinstance(override.value, (dict, list)):
        return codes.ADD_EXISTING_KEY.finding(
                       f"'+{key}=...' adds a key that already exists; Hydra refuses it "
                       f"(drop the '+', or use '++' to add or override)", (key,),
                       fix=(Change(key, None, override.value, "set it without '+'"),), where=where)
    tree_update(tree, key, override.value, merge=True)
    if not exists and not index.knows(key) and not key.startswith(_TOOL_NAMESPACES) and foreign_key(key) is None:
        close = index.closest(key)
        if close:
            return codes.ADDED_KEY_UNREAD.finding(
                           f"'{override.text}' adds a key verl {version} does not read; did you mean "
                           f"{_quote_list(close)}?", (key,), where=where, details={"did_you_mean": close})
    return None


def _resolved_or_none(tree: dict[str, Any], key: str) -> Any:
    """What Hydra's OmegaConf.select(cfg, key) sees: resolved, None for '???' or a broken link."""
    try:
        value = Resolver(tree).value(key)
    except (KeyError, MissingKey, Unresolvable):
        return None
    return None if value == MISSING_VALUE else value


def _quote_list(items: Sequence[str]) -> str:
    return " or ".join(f"'{i}'" for i in items)


def _unknown_key(key: str, version: str, config_name: str, where: str | None, plus_ok: bool = False,
                 value: Any = _MISSING, taken: frozenset[str] = frozenset()) -> Finding:
    index = key_index(version, config_name)
    elsewhere = [v for v in known_in_versions(key, config_name) if v != version]
    foreign = foreign_key(key) if not elsewhere else None
    other_config = None if elsewhere or foreign else _other_config_with(key, config_name, version)
    # a real key of another release, another trainer config, a recipe or a verl commit is no typo; nor is a key
    # renamed onto one the user already sets (that would be a second override of it, changing what the run does)
    close = [] if elsewhere or foreign or other_config else [c for c in index.closest(key) if c not in taken]
    message = f"key '{key}' is not in verl {version} defaults"
    if plus_ok:
        message = f"key '{key}' does not exist yet; Hydra needs '+{key}=...' to add it"
    elif elsewhere:
        message += f" (it exists in verl {', '.join(elsewhere)}; pass --verl-version if that is your version)"
    elif foreign is not None:
        message += f" (a key of {foreign.owner}, not of a verl release: {foreign.source})"
    elif other_config is not None:
        message += f" (a key of verl's {other_config} config; this run composes {config_name})"
    if close and not plus_ok:
        message += f"; did you mean {_quote_list(close)}?"
    fix: tuple[Change, ...] = ()
    if close and value is not _MISSING and not plus_ok and likely_typo(key, close[0]):
        # a likely typo: set the key the user meant (the misspelled one is never read)
        fix = (Change(close[0], None, value, f"'{key}' looks like a typo of '{close[0]}'", renames=key),)
    details: dict[str, Any] = {"did_you_mean": close, "known_in": elsewhere}
    if foreign is not None:
        details["defined_by"] = foreign.owner
    return codes.UNKNOWN_KEY.finding(message, (key,), fix=fix, where=where, details=details)


def _other_config_with(key: str, config_name: str, version: str) -> str | None:
    """Another of verl's trainer configs whose defaults hold ``key`` (the Megatron one for a megatron.* key under
    an FSDP config), in this version or any."""
    from advisor.errors import AdvisorError

    for other in BASE_CONFIGS:
        if other == config_name:
            continue
        for v in (version, *version_names()):
            try:
                if key_index(v, other).knows(key):
                    return other
            except (AdvisorError, FileNotFoundError, KeyError):
                continue
    return None


def _deprecations(cfg: VerlConfig, rejected: Sequence[UserSetting] = (), skip: frozenset[str] = frozenset()
                  ) -> list[Finding]:
    """Keys verl renamed or removed (L002 while verl still reads them, L003 once it rejects them), and
    values it no longer accepts (L004); ``_deprecated`` says which entry applies in which version. ``skip``: the
    unknown keys past the cap, summarised in one line (a file of 40,000 of them is no verl config)."""
    table = load_knowledge("deprecated_keys.yaml")
    out: list[Finding] = []
    for setting in [*cfg.settings, *rejected]:
        if setting.kind is OverrideKind.DELETE or setting.key in skip:
            continue
        found = lookup_deprecation(setting.key, cfg.version, cfg.config_name)
        if found is None or (not found.removed and read_key(setting.key, cfg.version) != setting.key):
            continue  # a key verl accepts and never reads: W014 says so (not "deprecated but still read")
        entry, replacement = found.entry, found.replacement
        if found.removed:
            message = f"'{setting.key}' {_key_history(found)}; " + (
                f"in verl {cfg.version} it is '{replacement}'" if replacement else "remove it")
            severity, code = Severity.ERROR, codes.REMOVED_KEY
            if setting.kind in (OverrideKind.ADD, OverrideKind.FORCE_ADD):
                # '+' makes Hydra accept it; verl then never reads it: legal but wrong
                severity = Severity.WARNING
                message += f" (added with '+', Hydra accepts it, but verl {cfg.version} never reads it)"
        else:
            note = f" ({entry['note']})" if entry.get("note") else ""
            use = f"use '{replacement}'" if replacement else "remove it"
            message = f"'{setting.key}' is deprecated since verl {entry['since']}{note}; {use}"
            severity, code = Severity.WARNING, codes.DEPRECATED_KEY
        out.append(code.finding(message, (setting.key,),
                                "; ".join(dict.fromkeys(h.entry.get("source", "") for h in found.hops)),
                                severity=severity, where=setting.where,
                           details={"replacement": replacement, "scale": entry.get("scale", "same"),
                                    "since": str(entry["since"]), "from_version": found.last_version}))
    own_rollout = cfg.entry is not None and cfg.entry.own_rollout  # verl's RolloutConfig is never built
    for entry in table["values"]:
        if own_rollout and entry["key"].startswith("actor_rollout_ref.rollout."):
            continue
        value = cfg.get(entry["key"], _MISSING)
        if value != entry["value"] or not at_least(cfg.version, entry["min_version"]):
            continue
        out.append(codes.REMOVED_VALUE.finding(entry["message"], (entry["key"],), entry["source"],
                           fix=(Change(entry["key"], value, entry["replacement_value"],
                                       f"'{entry['value']}' is no longer accepted"),),
                           where=cfg.where(entry["key"])))
    return out


def _key_history(found: Deprecation) -> str:
    """"is from verl ≤ 0.2.0.post2; verl 0.3.0 replaced it with 'b' (why), verl 0.8.0 moved that"."""
    origin = (f"is from verl ≤ {found.last_version}" if found.last_version
              else f"is from verl before {found.entry['since']}")
    steps = []
    name = found.key  # the key as the previous hop left it (only the last hop can remove it)
    for i, hop in enumerate(found.hops):
        subject = "it" if i == 0 else "that"
        if hop.to is None:
            step = f"verl {hop.entry['since']} removed {subject}"
        else:
            moved = hop.to.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]
            step = f"verl {hop.entry['since']} {'moved' if moved else 'replaced'} {subject}"
            if i < len(found.hops) - 1:
                step += f" to '{hop.to}'" if moved else f" with '{hop.to}'"
            name = hop.to
        steps.append(step + (f" ({hop.entry['note']})" if hop.entry.get("note") else ""))
    return f"{origin}; " + ", ".join(steps)


def scheduler_of(variable: str) -> str | None:
    """The job scheduler that sets an environment variable at launch (``SLURM_JOB_NUM_NODES`` -> Slurm)."""
    for entry in load_knowledge("scheduler_variables.yaml")["variables"]:
        if re.search(entry["match"], variable):
            return str(entry["scheduler"])
    return None


def scheduler_keys(launch: LaunchCommand | None) -> dict[str, str]:
    """Keys whose value a job scheduler supplies at launch -> the variable that feeds them."""
    if launch is None:
        return {}
    return {key: name for name, keys in launch.unresolved.items() if scheduler_of(name) for key in keys}


def _type_mismatches(cfg: VerlConfig) -> list[Finding]:
    """User values whose type verl's dataclasses would reject (a string where a number goes)."""
    defaults = flatten_leaves(default_container(cfg.version, cfg.config_name))
    at_launch = scheduler_keys(cfg.launch)
    unknown = {k for keys in cfg.launch.unresolved.values() for k in keys} if cfg.launch else set()
    texty = text_keys(cfg.version, cfg.config_name)
    out: list[Finding] = []
    for key, value in cfg.user_keys.items():
        if key in at_launch or key in texty:
            continue  # a number the job scheduler supplies (L012 says so), or a field that takes text too
        default = defaults.get(key, _MISSING)
        if default is _MISSING or default is None or isinstance(default, str) or value is None:
            continue
        resolved = cfg.get(key, value)
        # YAML defaults say int where verl's dataclass says float (top_p: 1), so only bool vs number
        # vs text is checked.
        if isinstance(default, bool):
            expected, ok = "a boolean", isinstance(resolved, bool)
        elif isinstance(default, (int, float)):
            expected = "a number"
            ok = isinstance(resolved, (int, float)) and not isinstance(resolved, bool)
        else:
            continue
        if not ok:
            # a value built from a variable the script leaves unknown is known only when it runs: a warning
            if key in unknown:
                out.append(codes.WRONG_TYPE.finding(
                                   f"'{key}' is {resolved!r}: {_unknown_because(cfg.launch, key)}, and verl expects "
                                   f"{expected} once it runs; {_how_to_know(cfg.launch, key)}", (key,),
                                   severity=Severity.WARNING, where=cfg.where(key)))
                continue
            out.append(codes.WRONG_TYPE.finding(f"'{key}' is {resolved!r} but verl expects {expected}", (key,),
                                                where=cfg.where(key)))
    return out


def _branch_names(launch: LaunchCommand | None, key: str) -> list[tuple[str, int]]:
    """(variable, line) of each variable ``key`` depends on that a block the advisor could not decide sets."""
    if launch is None:
        return []
    return [b for name, keys in launch.unresolved.items() if key in keys and (b := unknown_branch_variable(name))]


def _unknown_because(launch: LaunchCommand | None, key: str) -> str:
    branches = _branch_names(launch, key)
    if not branches:
        return "it depends on a shell variable the script does not define here"
    name, line = branches[0]
    return f"the branches of the block at line {line} set '{name}' differently"


def _how_to_know(launch: LaunchCommand | None, key: str) -> str:
    decide = sorted(launch.undecided, key=launch.undecided.__getitem__) if launch is not None else []
    if _branch_names(launch, key) and decide:
        return (f"pass --set-var {decide[0]}=VALUE (what your launch environment sets) to follow one branch, or "
                "KEY=VALUE after the file")
    return "pass KEY=VALUE after the file to check it with a value"


def _script_findings(launch: LaunchCommand, path: str) -> list[Finding]:
    out: list[Finding] = []
    for name, keys in sorted(launch.unresolved.items()):
        uniq = sorted(set(keys))
        scheduler = scheduler_of(name) if name != COMMAND_SUBSTITUTION else None
        if scheduler and uniq:
            out.append(codes.SET_AT_LAUNCH.finding(
                               f"'${name}' is set by the job scheduler at launch ({scheduler}); "
                               f"{', '.join(uniq)} {'is' if len(uniq) == 1 else 'are'} known only then, so the checks "
                               f"that need {'it' if len(uniq) == 1 else 'them'} are skipped (pass "
                               f"{uniq[0]}=VALUE after the file to check with a value)",
                               tuple(uniq), where=f"{path}:{launch.line}",
                               details={"variable": name, "scheduler": scheduler}))
            continue
        branch = unknown_branch_variable(name)
        what = "command substitution $(...) is not run" if name == COMMAND_SUBSTITUTION \
            else (f"variable '{branch[0]}' is set differently by the branches of the block at line {branch[1]}, "
                  "which tests a value the script does not set") if branch and "branches at" in name \
            else (f"variable '{branch[0]}' is set at line {branch[1]} in a block the advisor does not evaluate "
                  "(it depends on the environment)") if branch \
            else f"variable '{name}' is not defined in the script"
        out.append(codes.UNDEFINED_VARIABLE.finding(codes.undefined_variable_message(what, uniq),
                                                    tuple(uniq), where=f"{path}:{launch.line}",
                                                    details={"variable": name, "what": what}))
    for note in launch.notes:
        out.append(codes.SCRIPT_NOTE.finding(note, (), where=path))
    return out
