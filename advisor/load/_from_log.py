"""The config of a run, recovered from its console log alone.

verl prints what it runs before the first step, in one of three shapes, all read without executing anything:

- the resolved config: ``pprint(OmegaConf.to_container(config, resolve=True))`` in ``main_task``/``TaskRunner``
  (verl/trainer/main_ppo.py, every release), a Python dict literal over many lines, each behind a Ray prefix
  (``(main_task pid=54569) {'actor_rollout_ref': {'actor': {...``). Parsed with :func:`ast.literal_eval`, which
  accepts literals only (never ``eval``);
- a ``set -x`` trace of the launch script: ``+ python3 -m verl.trainer.main_ppo key=value ...`` (``++`` in a
  nested script), the words already quoted by bash;
- the launch command pasted at the top (``python3 -m verl.trainer.main_ppo \\`` and its continued lines), which the
  launch-script interpreter (``_script``) reads as it reads a script.

The printed config wins: it is what the run used, defaults and interpolations resolved. Only the head of the log
is searched (verl prints all this before the first step).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from advisor.errors import ConfigError
from advisor.plural import counted

if TYPE_CHECKING:
    from advisor.findings import Finding

    from ._config import VerlConfig

_HEAD_BYTES = 16 << 20  # the config is printed before step 1; a 7 GB log is not read past this
_MAX_DICT_LINES = 4000  # a resolved verl config prints ~400-900 lines
_MAX_DICT_CHARS = 1 << 20
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_WHO = r"(?:[\w.:-]+ )*pid=\d+(?:, ip=[\d.]+)?"
_RAY_PREFIX_RE = re.compile(rf"^\s*(?:\((?P<who>{_WHO})\)\s?)?")
_GLUED_RE = re.compile(rf"\({_WHO}\)")  # another process's output glued onto a line
# the top-level keys of verl's trainer configs, in pprint's (sorted) order the first is one of these
_CONFIG_START_RE = re.compile(r"^\{'(?:actor_rollout_ref|algorithm|critic|data|reward_model|trainer)': ")
_COMMAND_RE = re.compile(r"^(?P<trace>\++ )?(?:\S*/)?python3?\s+(?:-\S+\s+)*-m\s+(?P<module>(?:verl|recipe)\.[\w.]+)")

Source = Literal["printed", "trace", "command"]
SOURCE_NAMES: dict[str, str] = {
    "printed": "the config verl printed at start-up",
    "trace": "the launch command of its set -x trace",
    "command": "the launch command written at its top",
}


@dataclass(frozen=True)
class PrintedConfig:
    """What a log holds of its run's config: where, and either the resolved tree or the command as a script."""

    source: Source
    line: int
    """1-based line of the log where it starts"""
    tree: dict[str, Any] | None = None
    """the resolved config (``source == "printed"``)"""
    script: str | None = None
    """the launch command, as a shell script (``trace`` and ``command``)"""

    @property
    def description(self) -> str:
        return f"{SOURCE_NAMES[self.source]} (line {self.line})"


_CONSOLE_LOG_HINT = re.compile(r"(?:^|\)\s*)step:\d+ - \S+:|^\s*\((?:main_task|TaskRunner) pid=\d+\)|"
                               r"\{'actor_rollout_ref': \{", re.M)


def is_console_log(path: Path) -> bool:
    """A verl console log (step lines, Ray's driver prefixes or the printed config), judged from its head."""
    if path.suffix in (".yaml", ".yml", ".json", ".sh", ".bash", ".zsh") or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return False
    if "\x1b" in head:
        head = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", head)
    return bool(_CONSOLE_LOG_HINT.search(head))


def load_run_config(source: str | Path | None, overrides: list[str] | tuple[str, ...] = (), *,
                    verl_version: str | None = None, config_name: str = "ppo_trainer",
                    script_vars: Mapping[str, str] | None = None) -> VerlConfig:
    """:func:`load_config`, and a verl console log too: the config it printed or its launch command."""
    from ._config import load_config

    if source is not None and is_console_log(Path(source)):
        return load_config_from_log(source, list(overrides), verl_version=verl_version)
    return load_config(source, overrides, verl_version=verl_version, config_name=config_name,
                       script_vars=script_vars)


def read_log_head(path: Path) -> list[str]:
    """The lines of the first ``_HEAD_BYTES`` of a log, ANSI colours removed."""
    import os

    from advisor.inputfile import open_regular

    fd = open_regular(path)  # a regular file (a FIFO would block), never read past the head
    try:
        data = os.read(fd, _HEAD_BYTES)
    except OSError as err:
        raise ConfigError(f"cannot read ({err.strerror})", path=str(path)) from err
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    return text.split("\n")


def find_printed_config(lines: list[str]) -> PrintedConfig | None:
    """The run's config in a log's lines: the printed dict if there is one, else a launch command."""
    printed = _printed_dict(lines)
    if printed is not None:
        return printed
    trace = command = None
    for number, raw in enumerate(lines, start=1):
        match = _COMMAND_RE.match(_shell_text(raw))
        if match is None or match.group("module").endswith(("sft_trainer", "main_generation", "main_eval")):
            continue
        if match.group("trace"):
            trace = trace or PrintedConfig("trace", number, script=_as_script(lines, number - 1, trace=True))
        elif command is None:
            command = PrintedConfig("command", number, script=_as_script(lines, number - 1, trace=False))
    return trace or command


_ASSIGNMENT_RE = re.compile(r"^(?:export\s+)?[A-Za-z_]\w*=")
_TRACE_RE = re.compile(r"^\++ ")


def _shell_text(raw: str) -> str:
    line = raw.replace("\r", "")
    return _RAY_PREFIX_RE.sub("", line, count=1).strip() if line.lstrip().startswith("(") else line.strip()


def _as_script(lines: list[str], start: int, *, trace: bool) -> str:
    """The command at ``lines[start]`` (with its backslash-continued lines) as a script, after the variable
    assignments above it (``MODEL_PATH=...``, or a trace's ``++ MODEL_PATH=...``); every other line is left blank,
    so a line of the script is the same line of the log."""
    out = [""] * start
    for i in range(start):
        text = _shell_text(lines[i])
        if trace:
            if not _TRACE_RE.match(text):
                continue
            text = _TRACE_RE.sub("", text)
        if _ASSIGNMENT_RE.match(text):
            out[i] = text
    for i in range(start, min(len(lines), start + 500)):
        text = lines[i].rstrip("\r")
        text = _TRACE_RE.sub("", text.strip()) if trace else text
        out.append(text)
        if not text.rstrip().endswith("\\"):
            break
    return "\n".join(out) + "\n"


def _printed_dict(lines: list[str]) -> PrintedConfig | None:
    for number, raw in enumerate(lines, start=1):
        if "{'" not in raw:
            continue
        prefix = _RAY_PREFIX_RE.match(raw)
        body = raw[prefix.end():] if prefix else raw
        if not _CONFIG_START_RE.match(body.lstrip()):
            continue
        who = prefix.group("who") if prefix else None
        tree = _literal(lines, number - 1, who)
        if isinstance(tree, dict) and "actor_rollout_ref" in tree:  # an RL trainer's (not SFT's) config
            return PrintedConfig("printed", number, tree=tree)
    return None


def _literal(lines: list[str], start: int, who: str | None) -> Any:
    """The dict literal printed from ``lines[start]`` on by process ``who`` (other processes' lines in between are
    skipped); None when it does not parse."""
    parts: list[str] = []
    size = 0
    for raw in lines[start : start + _MAX_DICT_LINES]:
        prefix = _RAY_PREFIX_RE.match(raw)
        if who is not None and (prefix is None or prefix.group("who") != who):
            continue  # another process's output, interleaved
        body = raw[prefix.end():] if prefix else raw
        body = _GLUED_RE.split(body, maxsplit=1)[0].rstrip("\r")
        parts.append(body)
        size += len(body)
        if size > _MAX_DICT_CHARS:
            return None
        if body.rstrip().endswith("}"):
            try:
                return ast.literal_eval("\n".join(parts).strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue  # a nested dict closed, not the whole one
    return None


def load_config_from_log(path: str | Path, overrides: list[str] | tuple[str, ...] = (), *,
                         verl_version: str | None = None) -> VerlConfig:
    """The config a console log printed (or its launch command), as a :class:`VerlConfig` whose ``from_log`` says
    where it came from.

    Raises:
        ConfigError: the log holds neither a printed config nor a verl launch command.
    """
    import yaml

    from advisor.verl import normalize_version, parse_override

    from ._config import _from_launch, _from_yaml
    from ._script import parse_launch_script

    path = Path(path)
    if not path.is_file():
        raise ConfigError("file not found", path=str(path))
    found = find_printed_config(read_log_head(path))
    if found is None:
        raise ConfigError("holds no config: verl prints its resolved config at start-up, and this log has neither "
                          "that nor a launch command", path=str(path),
                          suggestion="pass the config too: advisor suggest CONFIG METRICS")
    version = normalize_version(verl_version) if verl_version else None
    cli = [parse_override(o, path="command line") for o in overrides]
    if found.tree is not None:
        tree = dict(found.tree)
        if _strategy(tree) == "megatron":  # compose on the Megatron trainer's defaults, as the run did
            tree = {"defaults": ["ppo_megatron_trainer", "_self_"], **tree}
        cfg = _from_yaml(path, yaml.safe_dump(tree, sort_keys=False), cli, version)
        cfg.kind = "log-printed"
        cfg.findings = _as_printed(cfg, found.tree)
    else:
        assert found.script is not None
        cfg = _from_launch(path, parse_launch_script(found.script, str(path)), cli, version)
        cfg.kind = "log-command"
    cfg.from_log = found
    return cfg


def _as_printed(cfg: VerlConfig, printed: dict[str, Any]) -> list[Finding]:
    """The findings of a config verl printed, less what the print itself refutes: a key verl printed is one the
    run's verl has (a build between releases, a fork), never unknown (one L014 note names them); a renamed key
    verl printed at its own default (null, or the version's default value) is verl's, not something the user set."""
    from advisor import codes
    from advisor.verl import default_container, flatten_leaves
    from advisor.verl import exists as tree_exists

    leaves = flatten_leaves(printed)
    defaults = default_container(cfg.version, cfg.config_name)
    renamed = (codes.DEPRECATED_KEY.id, codes.REMOVED_KEY.id)
    unknown: list[str] = []
    kept: list[Finding] = []
    for f in cfg.findings:
        key = f.keys[0] if f.keys else None
        if key in leaves and f.id == codes.UNKNOWN_KEY.id:
            unknown.append(key)
            continue
        successor = (f.details or {}).get("replacement")
        if key in leaves and f.id in renamed and (leaves[key] is None or (
                tree_exists(defaults, key) and _default_leaf(defaults, key) == leaves[key])):
            continue
        if key in leaves and f.id == codes.DEPRECATED_KEY.id and successor and not _printed_has(printed, successor):
            continue  # the run's verl printed no successor: the key was current in the verl the run used
        kept.append(f)
    if unknown:
        shown = ", ".join(f"'{k}'" for k in unknown[:_MAX_SHOWN]) + (
            f" (+{len(unknown) - _MAX_SHOWN} more)" if len(unknown) > _MAX_SHOWN else "")
        kept.append(codes.PRINTED_KEY.finding(
            f"verl printed {counted(len(unknown), 'key')} that verl {cfg.version}'s defaults lack ({shown}): the run's "
            "own verl had them (a build between releases or a fork), so they are read as real", tuple(unknown),
            where=cfg.where(unknown[0])))
    return kept


def _printed_has(tree: dict[str, Any], key: str) -> bool:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _default_leaf(tree: dict[str, Any], key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _strategy(tree: dict[str, Any]) -> Any:
    actor = tree.get("actor_rollout_ref")
    actor = actor.get("actor") if isinstance(actor, dict) else None
    return actor.get("strategy") if isinstance(actor, dict) else None


_SKIP_COMPARE = ("trainer.experiment_name", "trainer.project_name", "trainer.default_local_dir",
                 "trainer.default_hdfs_dir", "trainer.logger")  # names and places: not how the run trained
_MAX_SHOWN = 5


def printed_differences(cfg: VerlConfig, log: str | Path) -> list[str]:
    """When ``log`` is a console log that printed its config and ``cfg`` came from elsewhere: one warning naming
    the keys the two set differently (a config that is not this run's), or nothing."""
    from advisor.errors import AdvisorError

    path = Path(log)
    if getattr(cfg, "from_log", None) is not None or not is_console_log(path):
        return []
    try:
        printed = load_config_from_log(path, verl_version=cfg.version)
    except AdvisorError:
        return []
    keys = dict.fromkeys([*cfg.user_keys, *(printed.user_keys if printed.kind == "log-command" else ())])
    differ = []
    for key in keys:
        if key.startswith(_SKIP_COMPARE) or not (cfg.has(key) and printed.has(key)):
            continue
        mine, theirs = cfg.get(key), printed.get(key)
        if any(isinstance(v, str) and "$" in v for v in (mine, theirs)):
            continue  # a shell variable one of them does not resolve
        if not _equal(mine, theirs):
            differ.append(f"{key}: {theirs!r} in the log, {mine!r} in {cfg.path}")
    if not differ:
        return []
    more = len(differ) - _MAX_SHOWN
    shown = "; ".join(differ[:_MAX_SHOWN]) + (f" (+{more} more)" if more > 0 else "")
    return [f"the config {log} printed ({printed.from_log.description}) differs from {cfg.path} in "
            f"{counted(len(differ), 'key')}: {shown}"]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), abs(float(b)), 1e-30)
    return bool(a == b)
