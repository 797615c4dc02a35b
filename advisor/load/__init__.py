"""Loading what the user set: a YAML config, a launch script, overrides or a Hydra run directory.

``load_config`` turns any of them into one :class:`VerlConfig`: verl's defaults for the right version
(``advisor.verl``) plus the user's own settings, with where each was set. Reading is bounded
(``_safe_yaml``) and the launch-script interpreter (``_script``) never executes anything.
"""

from __future__ import annotations

from ._config import VerlConfig, load_config
from ._reads import recording_reads, was_read

__all__ = [
    "VerlConfig",
    "load_config",
    "recording_reads",
    "was_read",
]
