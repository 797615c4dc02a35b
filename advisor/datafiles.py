"""Locate and read the data files shipped in the ``knowledge`` package."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .errors import PlaybookError

try:  # the C loader is ~10x faster; fall back where libyaml is absent
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


def knowledge_dir() -> Path:
    return Path(str(resources.files("knowledge")))


@cache
def load_knowledge(relative: str) -> Any:
    """Parse a YAML file under knowledge/ (cached; treat the result as read-only)."""
    path = knowledge_dir() / relative
    try:
        with path.open("r", encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_Loader)
    except OSError as err:
        raise PlaybookError(f"cannot read knowledge file ({err.strerror})", path=str(path)) from err
    except yaml.YAMLError as err:
        raise PlaybookError(f"malformed YAML ({err})", path=str(path)) from err
