"""Configs of other tools (TRL, OpenRLHF, DeepSpeed, Accelerate) given where a verl config is expected.

``knowledge/other_tools.yaml`` holds each tool's top-level keys and launch commands, with their source. Such a
file is named in one line (exit 2): it is not "checked" as a verl config full of unknown keys, and never edited.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from advisor.datafiles import load_knowledge
from advisor.errors import ConfigError

_SUGGESTION = "advisor check reads verl configs: a verl YAML, a launch script that runs verl, or a Hydra run directory"


def _verl_sections() -> set[str]:
    from advisor.verl import default_container, version_names

    sections = {"defaults", "hydra"}
    for version in version_names():
        sections.update(default_container(version, "ppo_trainer"))
    return sections


def other_tool_config(data: Mapping[str, Any], path: str) -> ConfigError | None:
    """The error naming the tool whose config ``data`` (a YAML or JSON mapping's top level) is; None: not one."""
    keys = {str(k) for k in data}
    best: tuple[int, dict[str, Any], list[str]] | None = None
    for tool in load_knowledge("other_tools.yaml")["tools"]:
        matched = [k for k in tool["keys"] if k in keys]
        if len(matched) >= tool["min_keys"] and (best is None or len(matched) > best[0]):
            best = (len(matched), tool, matched)
    if best is None or keys & _verl_sections():
        return None
    _, tool, matched = best
    shown = ", ".join(matched[:4]) + (", ..." if len(matched) > 4 else "")
    return ConfigError(f"is {tool['what']} (keys {shown}), not a verl config", path=path, suggestion=_SUGGESTION)


def other_tool_script(text: str, path: str) -> ConfigError | None:
    """The error naming the tool a launch script that runs no verl command runs instead; None: no tool known."""
    for tool in load_knowledge("other_tools.yaml")["tools"]:
        for pattern in tool["commands"]:
            if (m := re.search(pattern, text, re.M)) is not None:
                line = text.count("\n", 0, m.start()) + 1
                return ConfigError(f"runs {tool['name']} ('{m.group(0).strip()}'), not verl", path=path,
                                   where=line, suggestion=_SUGGESTION)
    return None
