"""Loading what the user set: a YAML config, a launch script, overrides or a Hydra run directory.

``load_config`` turns any of them (or a run's console log: the config verl printed, ``_from_log``) into one
:class:`VerlConfig`: verl's defaults for the right version
(``advisor.verl``) plus the user's own settings, with where each was set. Reading is bounded
(``_safe_yaml``) and the launch-script interpreter (``_script``) never executes anything.
"""

from __future__ import annotations

from ._config import VerlConfig, load_config_text
from ._from_log import (
    SOURCE_NAMES,
    PrintedConfig,
    find_printed_config,
    is_console_log,
    load_config_from_log,
    printed_differences,
    read_log_head,
)
from ._from_log import load_run_config as load_config
from ._reads import recording_reads, was_read

__all__ = [
    "SOURCE_NAMES",
    "PrintedConfig",
    "VerlConfig",
    "find_printed_config",
    "is_console_log",
    "load_config",
    "load_config_from_log",
    "load_config_text",
    "printed_differences",
    "read_log_head",
    "recording_reads",
    "was_read",
]
