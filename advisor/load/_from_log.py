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

from advisor import limits
from advisor.errors import ConfigError
from advisor.plural import counted
from advisor.verl import VALIDATION_PREFIXES, render_value

if TYPE_CHECKING:
    from advisor.findings import Finding

    from ._config import VerlConfig

_HEAD_BYTES = limits.LOG_HEAD_BYTES  # the config is printed before step 1
_MAX_DICT_LINES = limits.PRINTED_DICT_LINES
_MAX_DICT_CHARS = limits.PRINTED_DICT_CHARS
_CONFIG_START = b"{'actor_rollout_ref': "  # pprint sorts keys: an RL trainer's printed config starts so
# what opens or closes a bracket in a printed line; a quoted string (pprint never breaks one across lines) is
# matched whole, so a brace inside it is not counted
_BRACKET_RE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|[{}\[\]()]")
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
    return _plain_lines(data)


def _plain_lines(data: bytes) -> list[str]:
    """Log bytes as lines of text, ANSI colours removed."""
    text = data.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    return text.split("\n")


def find_printed_config(lines: list[str]) -> PrintedConfig | None:
    """The run's config in a log's lines: the printed dict if there is one, else a launch command."""
    printed = _printed_dict(lines)
    if printed is not None:
        return printed
    trace = command = None  # the last trace (a relaunch appended to the log traces its own), the first command
    for number, raw in enumerate(lines, start=1):
        match = _COMMAND_RE.match(_shell_text(raw))
        if match is None or match.group("module").endswith(("sft_trainer", "main_generation", "main_eval")):
            continue
        if match.group("trace"):
            trace = number
        elif command is None:
            command = number
    if trace is not None:  # one script built, after the search: the search stays linear in the lines
        return PrintedConfig("trace", trace, script=_as_script(lines, trace - 1, trace=True))
    if command is not None:
        return PrintedConfig("command", command, script=_as_script(lines, command - 1, trace=False))
    return None


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


def _printed_dict(lines: list[str], first_line: int = 1) -> PrintedConfig | None:
    """The last config printed in ``lines`` (a log appended across a relaunch prints one per run; the last is the
    run its last metrics come from). One pass, each line read once: a printed dict is followed to the line where
    its brackets close (then parsed, once), a cap (``limits.PRINTED_DICT_LINES`` / ``_CHARS``) or the next line
    that starts a config (a print cut short by a crash, then the relaunch's), so 3,000 crafted opening lines cost
    3,000 lines of work, not 3,000 x 4,000 parses."""
    trained = untried = None  # the last config a training step followed; a later one none has (yet)
    open_dict: _PrintedDict | None = None
    for index, raw in enumerate(lines):
        if "{'" in raw:
            prefix = _RAY_PREFIX_RE.match(raw)
            body = raw[prefix.end():] if prefix else raw
            if _CONFIG_START_RE.match(body.lstrip()):
                open_dict = _PrintedDict(index, prefix.group("who") if prefix else None)
        if open_dict is None:
            if untried is not None and "step:" in raw and _trains(raw):
                trained, untried = untried, None
            continue
        done, tree = open_dict.feed(index, raw)
        if done:
            start, open_dict = open_dict.start, None
            if isinstance(tree, dict) and "actor_rollout_ref" in tree:  # an RL trainer's (not SFT's) config
                untried = PrintedConfig("printed", first_line + start, tree=tree)
    # a relaunch that printed its config and then only validated (or died) trained nothing: its metrics are set
    # aside (advisor.metrics' segments), so the config judged is the last one a training step followed
    return trained or untried


_STEP_ITEMS_RE = re.compile(r"step:\d+ - (.*)")


def _trains(line: str) -> bool:
    """A console step line that logged a training metric (not only validation)."""
    match = _STEP_ITEMS_RE.search(line)
    if match is None:
        return False
    return any(not item.lstrip().startswith(VALIDATION_PREFIXES) for item in match.group(1).split(" - ") if ":" in item)


class _PrintedDict:
    """A dict literal being printed from line ``start`` on by process ``who`` (other processes' lines in between
    are skipped), fed line by line."""

    def __init__(self, start: int, who: str | None) -> None:
        self.start, self.who = start, who
        self.parts: list[str] = []
        self.size = self.depth = 0

    def feed(self, index: int, raw: str) -> tuple[bool, Any]:
        """(True, the parsed dict or None) once it closes, fails or passes a cap; (False, None) while open."""
        if index - self.start >= _MAX_DICT_LINES:
            return True, None
        prefix = _RAY_PREFIX_RE.match(raw)
        if self.who is not None and (prefix is None or prefix.group("who") != self.who):
            return False, None  # another process's output, interleaved
        body = raw[prefix.end():] if prefix else raw
        body = _GLUED_RE.split(body, maxsplit=1)[0].rstrip("\r")
        self.parts.append(body)
        self.size += len(body)
        if self.size > _MAX_DICT_CHARS:
            return True, None
        for token in _BRACKET_RE.findall(body):
            if len(token) == 1:
                self.depth += 1 if token in "{[(" else -1
        if self.depth > 0:
            return False, None
        try:  # the outer dict closed (or the brackets never balance): parse once, here
            return True, ast.literal_eval("\n".join(self.parts).strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return True, None


def _late_printed_config(path: Path) -> PrintedConfig | None:
    """The last config printed anywhere in a log longer than the head (a relaunch appended to a long log): a byte
    search of the file, chunk by chunk (linear, C speed), then a parse of the lines from that config's start."""
    import os

    from advisor.inputfile import open_regular

    fd = open_regular(path)
    try:
        offset = newlines = 0  # bytes read, and the newlines among them
        tail = b""  # the last bytes before ``offset``: a start split across two chunks is still found
        found: tuple[int, int] | None = None  # (byte where that line starts, its 0-based line number)
        while chunk := os.read(fd, limits.LOG_SCAN_CHUNK):
            data, base = tail + chunk, offset - len(tail)
            at = data.rfind(_CONFIG_START)
            if at >= 0:
                line_start = data.rfind(b"\n", 0, at) + 1
                found = (base + line_start, newlines - tail.count(b"\n") + data.count(b"\n", 0, line_start))
            newlines += chunk.count(b"\n")
            offset += len(chunk)
            tail = data[-(len(_CONFIG_START) - 1):]
        if found is None:
            return None
        os.lseek(fd, found[0], os.SEEK_SET)
        window = os.read(fd, 4 * _MAX_DICT_CHARS)  # the dict and other processes' lines between its own
    except OSError as err:
        raise ConfigError(f"cannot read ({err.strerror})", path=str(path)) from err
    finally:
        os.close(fd)
    return _printed_dict(_plain_lines(window), first_line=found[1] + 1)


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
    if _longer_than_head(path):  # a relaunch's config may be past the head: the last one printed is this run's
        found = _late_printed_config(path) or found
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


def _longer_than_head(path: Path) -> bool:
    try:
        return path.stat().st_size > _HEAD_BYTES
    except OSError:
        return False


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
        if key in leaves and f.id == codes.DEPRECATED_KEY.id and successor and not tree_exists(printed, successor):
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
            differ.append(f"{key}: {render_value(theirs)} in the log, {render_value(mine)} in {cfg.path}")
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
