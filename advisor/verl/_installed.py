"""The verl installed where the advisor runs: its version and its own config YAMLs, for exact defaults.

Found through package metadata (``importlib.metadata``), never by importing verl (which would pull in torch
and Ray). A regular install is read from site-packages; an editable one (``pip install -e`` of a checkout,
unreleased commits included) from the folder its ``direct_url.json`` names.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from ._source import CONFIG_DIR, TreeSource, version_string
from ._version import is_version

# Set to any value to ignore an installed verl (the advisor's own tests, or checking for another verl).
IGNORE_ENV = "ADVISOR_IGNORE_INSTALLED_VERL"


@dataclass(frozen=True)
class InstalledVerl:
    version: str
    root: Path  # the folder holding the ``verl/`` package
    source: TreeSource


def _package_root(dist: metadata.Distribution) -> Path | None:
    text = dist.read_text("direct_url.json")
    if text:
        try:
            info = json.loads(text)
        except ValueError:
            info = {}
        url = info.get("url", "") if isinstance(info, dict) else ""
        if isinstance(info, dict) and info.get("dir_info", {}).get("editable") and url.startswith("file://"):
            return Path(unquote(urlparse(url).path))
    located = Path(str(dist.locate_file("")))
    return located if located.is_dir() else None


@lru_cache(maxsize=1)
def installed_verl() -> InstalledVerl | None:
    """The installed verl with readable trainer configs, or None."""
    if os.environ.get(IGNORE_ENV):
        return None
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
