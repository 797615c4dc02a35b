"""The verl installed where the advisor runs: its version and its own config YAMLs, for exact defaults.

Found through package metadata (``importlib.metadata``), never by importing verl (which would pull in torch
and Ray). A regular install is read from site-packages; an editable one (``pip install -e`` of a checkout,
unreleased commits included) from the folder its ``direct_url.json`` names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from ._source import CONFIG_DIR, TreeSource, version_string
from ._version import is_version

if TYPE_CHECKING:
    from importlib import metadata

# Set to any value to ignore an installed verl (the advisor's own tests, or checking for another verl).
IGNORE_ENV = "ADVISOR_IGNORE_INSTALLED_VERL"


@dataclass(frozen=True)
class InstalledVerl:
    """The verl installed in this Python environment: its version, the folder holding its package, its trees."""

    version: str
    root: Path  # the folder holding the ``verl/`` package
    source: TreeSource


def _package_root(dist: metadata.Distribution) -> Path | None:
    text = dist.read_text("direct_url.json")
    if text:
        try:
            import json  # off the start-up path: read only for an installed verl

            info = json.loads(text)
        except ValueError:
            info = {}
        url = info.get("url", "") if isinstance(info, dict) else ""
        if isinstance(info, dict) and info.get("dir_info", {}).get("editable") and url.startswith("file://"):
            return Path(unquote(urlparse(url).path))
    located = Path(str(dist.locate_file("")))
    return located if located.is_dir() else None


def _has_verl_metadata() -> bool:
    """Whether a folder on ``sys.path`` holds verl's distribution metadata (``verl-*.dist-info``/``.egg-info``,
    ``verl.egg-link``), as ``importlib.metadata`` would find it."""
    import sys

    for folder in sys.path:
        try:
            with os.scandir(folder or ".") as entries:
                for entry in entries:
                    name = entry.name.lower()
                    if name == "verl.egg-link" or (name.startswith("verl-") and
                                                    name.endswith((".dist-info", ".egg-info"))):
                        return True
        except OSError:  # not a folder (a zip on the path), or unreadable
            continue
    return False


@lru_cache(maxsize=1)
def installed_verl() -> InstalledVerl | None:
    """The installed verl with readable trainer configs, or None."""
    if os.environ.get(IGNORE_ENV):
        return None
    if not _has_verl_metadata():  # the common case, answered without importing importlib.metadata (15 ms)
        return None
    from importlib import metadata

    try:
        dist = metadata.distribution("verl")
    except metadata.PackageNotFoundError:
        return None
    root = _package_root(dist)
    if root is None:
        return None
    source = TreeSource(root, label=f"installed verl at {root}")
    if source.read(f"{CONFIG_DIR}/ppo_trainer.yaml") is None:
        return None
    version = version_string(source) or dist.version
    return InstalledVerl(version, root, source) if is_version(version) else None
