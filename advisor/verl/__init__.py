"""verl itself, per version: its default configs, versions, recipes, renamed keys and launch grammar.

Everything the advisor knows about what verl ships, read as data (``knowledge/verl_defaults/``, generated
from each release's wheel by ``scripts/generate_verl_defaults.py``) and never by importing verl:

- ``_version``: one version order (PEP 440) and version ranges;
- ``_source`` / ``_installed``: verl's own YAMLs from a wheel, a source tree, a git commit or the installed verl;
- ``_defaults``: the default tree per version and entry config, and which version a config was written for;
- ``_recipes``: entry points and recipe folders; ``_deprecated``: keys verl renamed or removed;
- ``_keys``: the config sections of verl's roles (actor, rollout, ref, critic, reward model);
- ``_metric_names``: the validation metrics' prefixes (the metrics reader and the log's config both read them);
- ``_read_keys``: the key verl reads where its YAML still ships an older, unread one;
- ``_tree``: a config as nested dicts with OmegaConf's interpolation semantics;
- ``_overrides``: Hydra's command-line override grammar, parsed and rendered back.
"""

from __future__ import annotations

from ._defaults import (
    BASE_CONFIGS,
    MAIN,
    VERSION_ALIASES,
    config_base,
    default_container,
    detect_version,
    engine_config,
    flatten_leaves,
    key_index,
    known_in_versions,
    newest_release,
    normalize_version,
    supported_versions,
    text_keys,
    version_conflicts,
    version_names,
)
from ._deprecated import Deprecation, LostKey, lookup, lost_keys, not_renamed, removed_by
from ._foreign import ForeignKey, foreign_key
from ._installed import installed_verl
from ._keys import ACTOR, CRITIC, REF, REWARD_MODEL, ROLLOUT
from ._metric_names import VALIDATION_PREFIXES
from ._overrides import Override, OverrideKind, parse_override, render_override, render_value
from ._read_keys import UnreadKey, read_key, unread_key
from ._recipes import (
    ALIASES,
    EntryPoint,
    config_in_recipe,
    config_source,
    find_entry_point,
    is_entry_module,
    recipe_folder_entry_points,
    resolve_module,
)
from ._source import (
    GitSource,
    VerlSource,
    WheelSource,
    dataclass_classes,
    default_tree,
    engine_configs,
    extra_fields,
    field_annotations,
    generated_tree,
    text_fields,
)
from ._tree import (
    MISSING_VALUE,
    MissingKey,
    Resolver,
    Unresolvable,
    copy_tree,
    deep_merge,
    delete,
    exists,
    inert_resolvers,
    update,
)
from ._version import at_least, in_range, validate_range, version_key

__all__ = [
    "ACTOR",
    "ALIASES",
    "BASE_CONFIGS",
    "CRITIC",
    "MAIN",
    "MISSING_VALUE",
    "REF",
    "REWARD_MODEL",
    "ROLLOUT",
    "VALIDATION_PREFIXES",
    "VERSION_ALIASES",
    "Deprecation",
    "EntryPoint",
    "ForeignKey",
    "GitSource",
    "LostKey",
    "MissingKey",
    "Override",
    "OverrideKind",
    "Resolver",
    "UnreadKey",
    "Unresolvable",
    "VerlSource",
    "WheelSource",
    "at_least",
    "config_base",
    "config_in_recipe",
    "config_source",
    "copy_tree",
    "dataclass_classes",
    "deep_merge",
    "default_container",
    "default_tree",
    "delete",
    "detect_version",
    "engine_config",
    "engine_configs",
    "exists",
    "extra_fields",
    "field_annotations",
    "find_entry_point",
    "flatten_leaves",
    "foreign_key",
    "generated_tree",
    "in_range",
    "inert_resolvers",
    "installed_verl",
    "is_entry_module",
    "key_index",
    "known_in_versions",
    "lookup",
    "lost_keys",
    "newest_release",
    "normalize_version",
    "not_renamed",
    "parse_override",
    "read_key",
    "recipe_folder_entry_points",
    "removed_by",
    "render_override",
    "render_value",
    "resolve_module",
    "supported_versions",
    "text_fields",
    "text_keys",
    "unread_key",
    "update",
    "validate_range",
    "version_conflicts",
    "version_key",
    "version_names",
]
