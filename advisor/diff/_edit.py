"""A set of changes as an edit of the user's own file: the YAML config or the launch script.

A key the file sets is changed where it is set (a misspelt key is renamed there), a key it does not
set is added to it (under its parent mapping in a YAML, as one more override line in a script), so
that ``--write`` leaves a file that runs as it is. Changes to keys given on the advisor's command
line, and configs that are not a file the user edits (a Hydra run directory's dump, verl's defaults),
stay Hydra overrides.

Edits are made on the text, not by re-dumping a parsed tree: comments, order and quoting survive.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from advisor.errors import ConfigError
from advisor.findings import Change
from advisor.inputfile import read_capped
from advisor.load import VerlConfig
from advisor.verl import render_override

from ._literal import respell

EDITABLE_KINDS = ("yaml", "script")
MAX_EDIT_BYTES = 16 << 20  # the config reader's cap: a file it read is one it can edit


@dataclass
class FileEdit:
    """The file before and after the changes, and the changes that stay overrides.

    ``before`` and ``after`` are the text with ``\\n`` line ends (what the diff shows); the file itself is
    written back in its own encoding and line ends (``raw``: its bytes as read, ``newline``, ``encoding``).
    """

    path: str
    before: str
    after: str
    in_file: list[Change] = field(default_factory=list)
    overrides: list[Change] = field(default_factory=list)
    refused: list[tuple[Change, str]] = field(default_factory=list)  # changes that would set a key twice: why
    raw: bytes | None = None  # the bytes the analysis read: the file is written only while it still holds them
    stale: bool = False  # the file was saved between the analysis' read and this edit's: never written
    newline: str = "\n"
    encoding: str = "utf-8"  # a codec with its byte-order mark when the file had one ("utf-8-sig", "utf-16")

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        import difflib  # only when a diff is shown

        lines = difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                     fromfile=self.path, tofile=self.path)  # `patch -p0` applies it
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def after_bytes(self) -> bytes:
        """The edited file as it is written: the original's encoding and line ends."""
        text = self.after.replace("\n", self.newline) if self.newline != "\n" else self.after
        return text.encode(self.encoding)

    def write(self) -> Path:
        """Write the edited file, keeping the original as ``FILE.bak``: a byte-identical copy with the original's
        mode, created exclusively (never over an existing file, never through a link). The file is written only
        while it still holds the bytes the analysis read, checked again just before it is replaced (a save in
        between is not overwritten). A file with other hard links is written in place, so every name keeps
        seeing the one file; any other goes through a temporary file in the same folder renamed over it. When
        the write fails, the original is put back and no backup is left behind.

        Raises:
            ConfigError: the backup exists, the file changed since it was read, or a write failed.
        """
        target = Path(self.path)
        backup = target.with_name(target.name + ".bak")
        real = Path(os.path.realpath(target))  # a run.sh that is a link: the file it points to is edited
        raw = self.raw if self.raw is not None else self.before.encode("utf-8")
        try:
            st = os.stat(real)
            self._refuse_if_saved(real, raw, "changed since it was read")
            mode = stat.S_IMODE(st.st_mode)
            _create_exclusive(backup, raw, mode)
        except OSError as err:
            if err.errno == errno.EEXIST or isinstance(err, FileExistsError):
                raise ConfigError(f"a backup {backup} already exists; refusing to overwrite it", path=self.path,
                                  suggestion=f"move {backup} away (or apply the diff by hand)") from err
            raise ConfigError(f"cannot write ({err.strerror or err})", path=str(err.filename or self.path)) from err
        try:
            if st.st_nlink > 1:
                self._write_in_place(real, raw)
            else:
                self._write_and_rename(real, raw, mode)
        except OSError as err:
            _remove(backup)
            raise ConfigError(f"cannot write ({err.strerror or err})", path=str(err.filename or self.path)) from err
        except ConfigError:
            _remove(backup)
            raise
        return backup

    def _refuse_if_saved(self, real: Path, raw: bytes, what: str) -> None:
        if self.stale or _read_all(real) != raw:  # saved by someone else: theirs wins
            raise ConfigError(f"{what}; not written", path=self.path, suggestion="run the command again")

    def _write_and_rename(self, real: Path, raw: bytes, mode: int) -> None:
        import tempfile  # only when writing: 10 ms off every check

        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fp:
                os.fchmod(fp.fileno(), mode)
                fp.write(self.after_bytes())
                fp.flush()
                os.fsync(fp.fileno())
            self._refuse_if_saved(real, raw, "changed while it was being written")
            os.replace(tmp, real)
        finally:
            _remove(Path(tmp))  # gone already after the rename

    def _write_in_place(self, real: Path, raw: bytes) -> None:
        """Truncate and write the one file all its hard links name; on a failed write its original bytes go back."""
        with open(real, "r+b") as fp:
            if fp.read(MAX_EDIT_BYTES + 1) != raw or self.stale:
                raise ConfigError("changed while it was being written; not written", path=self.path,
                                  suggestion="run the command again")
            try:
                _overwrite(fp, self.after_bytes())
            except OSError:
                _overwrite(fp, raw)  # the backup holds them too, should this fail as well
                raise


def _overwrite(fp: BinaryIO, data: bytes) -> None:
    fp.seek(0)
    fp.truncate()
    fp.write(data)
    fp.flush()
    os.fsync(fp.fileno())


def _read_all(path: Path) -> bytes:
    with open(path, "rb") as fp:
        return fp.read(MAX_EDIT_BYTES + 1)


def _create_exclusive(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file ``path`` with ``mode``; EEXIST when anything is there (a dangling link too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) |
                 getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.fchmod(fd, mode)  # the original's mode exactly, whatever the umask (a 0600 run.sh stays 0600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError:
        os.close(fd)
        _remove(path)
        raise
    os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _decode(raw: bytes) -> tuple[str, str, str] | None:
    """(text with \\n line ends, newline, encoding) of a file's bytes; None when it is not text."""
    bom16 = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) and not raw.startswith(codecs.BOM_UTF32_LE)
    encoding = "utf-16" if bom16 else "utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        return None
    crlf = text.count("\r\n")
    newline = "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"
    if "\r" in text and newline == "\n" and "\n" not in text:
        newline = "\r"  # CR-only (old Mac tools)
    text = text.replace("\r\n", "\n") if newline == "\r\n" else text.replace("\r", "\n") if newline == "\r" \
        else text
    return text, newline, encoding


def edit_for(cfg: VerlConfig, changes: list[Change]) -> FileEdit | None:
    """The changes as an edit of the config's own file, or None when the config is not a file the user edits."""
    if cfg.kind not in EDITABLE_KINDS or not cfg.path or not changes:
        return None
    path = Path(cfg.path)
    try:
        raw = read_capped(path, MAX_EDIT_BYTES)
    except ConfigError:
        return None
    decoded = _decode(raw)
    if decoded is None:
        return None
    text, newline, encoding = decoded
    editor: _YamlEditor | _ScriptEditor = _YamlEditor(text) if cfg.kind == "yaml" else _ScriptEditor(text, cfg)
    import hashlib

    stale = cfg.source_sha256 is not None and hashlib.sha256(raw).hexdigest() != cfg.source_sha256
    edit = FileEdit(cfg.path, text, text, raw=raw, newline=newline, encoding=encoding, stale=stale)
    for change in changes:
        if (why := _second_override(cfg, change)) is not None:
            edit.refused.append((change, why))
        elif _set_on_command_line(cfg, change) or not editor.apply(change):
            edit.overrides.append(change)
        else:
            edit.in_file.append(change)
    edit.after = editor.text
    return edit


def _second_override(cfg: VerlConfig, change: Change) -> str | None:
    """Why ``change`` would set a key the file already sets a second time (None: it would not). A rename onto a
    key the user sets leaves two settings of it, and the later one wins: the run's meaning changes beyond the
    misspelt key (GPG's ``use_gpg_loss`` renamed to ``use_kl_loss`` beside ``use_kl_loss=False``). A key an
    unevaluated block of the script may set is not added again beside it."""
    if change.renames and change.key in cfg.user_keys:
        return f"{cfg.path} already sets {change.key} ({cfg.where(change.key)}); renaming {change.renames} onto it " \
               "would set it twice"
    launch = cfg.launch
    if launch is not None and change.key in launch.maybe_set and change.key not in cfg.user_keys:
        return (f"{cfg.path} may set {change.key} in a block the advisor does not evaluate (line "
                f"{launch.maybe_set[change.key]}); adding it again could set it twice")
    return None


def _set_on_command_line(cfg: VerlConfig, change: Change) -> bool:
    return cfg.where(change.renames or change.key) == "command line"


# ---------------------------------------------------------------------------------------------
# YAML


def _yaml_scalar(value: Any) -> str:
    import yaml

    if isinstance(value, float):
        return repr(value)  # 1e-06, as Hydra's YAML reads a float (PyYAML alone would need 1.0e-06)
    text: str = yaml.safe_dump(value, default_flow_style=True, width=10_000)
    return text.strip().removesuffix("...").strip()


class _YamlEditor:
    """Set, add, rename and delete keys in a block-style YAML mapping, line by line."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._composed: tuple[str, Any] | None = None

    def _root(self) -> Any:
        """The text's node tree, composed once per text (libyaml's composer when there: a 40,000-key file is
        composed in a fraction of a second, not seconds)."""
        import yaml

        if self._composed is not None and self._composed[0] is self.text:
            return self._composed[1]
        try:
            fast = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if not self.text.startswith("\ufeff") else \
                yaml.SafeLoader  # libyaml's marks skip a byte-order mark: the indexes would be off by one
            node = yaml.compose(self.text, Loader=fast)
        except (yaml.YAMLError, RecursionError):
            node = None
        self._composed = (self.text, node)
        return node

    @staticmethod
    def _find(node: Any, parts: list[str]) -> tuple[Any, Any, int]:
        """(key node, value node) of the deepest mapping entry on the path, and how many parts it matched."""
        import yaml

        key_node = None
        depth = 0
        for part in parts:
            if not isinstance(node, yaml.MappingNode):
                break
            match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if match is None:
                break
            key_node, node = match
            depth += 1
        return key_node, node, depth

    def apply(self, change: Change) -> bool:
        import yaml

        root = self._root()
        if root is not None and not isinstance(root, yaml.MappingNode):
            return False
        if change.renames:
            return self._rename(root, change)
        if change.delete:
            return self._delete(root, change.key.split("."))
        return self._set(root, change.key.split("."), change.new)

    def _set(self, root: Any, parts: list[str], value: Any) -> bool:
        import yaml

        if root is None:  # an empty file
            self.text = self.text + ("" if self.text.endswith("\n") or not self.text else "\n") + \
                self._block(parts, value, 0, 2)
            return True
        key_node, node, depth = self._find(root, parts)
        if depth == len(parts):
            if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
                start, end = node.start_mark.index, node.end_mark.index
                spelled = respell(value, self.text[start:end]) if isinstance(node, yaml.ScalarNode) else None
                self._replace(start, end, spelled or _yaml_scalar(value))
                return True
            return False
        if not isinstance(node, yaml.MappingNode) or node.flow_style:
            return False
        step = self._indent_step(root)
        indent = node.value[0][0].start_mark.column if node.value else (key_node.start_mark.column + step)
        at = self._line_start_after(node)
        block = self._block(parts[depth:], value, indent, step)
        if at > len(self.text):
            block = "\n" + block
        self.text = self.text[:at] + block + self.text[at:]
        return True

    def _rename(self, root: Any, change: Change) -> bool:
        old, new = change.renames.split("."), change.key.split(".")  # type: ignore[union-attr]
        if root is None:
            return False
        key_node, node, depth = self._find(root, old)
        if depth != len(old):
            return False
        if old[:-1] == new[:-1] and self._find(root, new)[2] < len(new):  # renamed in place (no duplicate key)
            import yaml

            if isinstance(node, yaml.ScalarNode) and _yaml_scalar(change.new) != node.value:
                self._replace(node.start_mark.index, node.end_mark.index, _yaml_scalar(change.new))
            self._replace(key_node.start_mark.index, key_node.end_mark.index, new[-1])
            return True
        return self._delete(root, old) and self._set(self._root(), new, change.new)

    def _delete(self, root: Any, parts: list[str]) -> bool:
        if root is None:
            return False
        key_node, node, depth = self._find(root, parts)
        if depth != len(parts):
            return False
        start = self.text.rfind("\n", 0, key_node.start_mark.index) + 1
        self.text = self.text[:start] + self.text[min(self._line_start_after(node), len(self.text)):]
        return True

    def _replace(self, start: int, end: int, text: str) -> None:
        self.text = self.text[:start] + text + self.text[end:]

    def _line_start_after(self, node: Any) -> int:
        """The offset of the line after the node's last character (len+1 past a file without a final newline)."""
        end = _last_end(node)
        if end > 0 and self.text[end - 1] == "\n":
            return end
        newline = self.text.find("\n", end)
        return len(self.text) + 1 if newline < 0 else newline + 1

    @staticmethod
    def _indent_step(root: Any) -> int:
        import yaml

        for _, value in root.value:
            if isinstance(value, yaml.MappingNode) and value.value and not value.flow_style:
                column: int = value.value[0][0].start_mark.column
                return max(1, column)
        return 2

    @staticmethod
    def _block(parts: list[str], value: Any, indent: int, step: int) -> str:
        lines = [" " * (indent + i * step) + f"{part}:" for i, part in enumerate(parts[:-1])]
        lines.append(" " * (indent + (len(parts) - 1) * step) + f"{parts[-1]}: {_yaml_scalar(value)}")
        return "\n".join(lines) + "\n"


def _last_end(node: Any) -> int:
    """Where a node's own text ends (a block collection's end mark is where the next token starts)."""
    import yaml

    if isinstance(node, yaml.MappingNode) and node.value and not node.flow_style:
        return _last_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and node.value and not node.flow_style:
        return _last_end(node.value[-1])
    return int(node.end_mark.index)


# ---------------------------------------------------------------------------------------------
# Launch scripts

_SHELL_SAFE = re.compile(r"^[\w@%+=:,./-]+$")


def _shell_word(override: str) -> str:
    return override if _SHELL_SAFE.match(override) else shlex.quote(override)


def _word_end(line: str, start: int) -> int:
    """Where the shell word starting at ``start`` ends (quotes and backslash escapes respected)."""
    i, quote = start, ""
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "\\":
            if i + 1 >= len(line) or line[i + 1] in "\r\n":
                return i  # a line continuation
            i += 1
        elif ch.isspace() or ch in ";&|":
            return i
        i += 1
    return i


class _ScriptEditor:
    """Change, rename, add and delete Hydra overrides on the lines of a launch script."""

    def __init__(self, text: str, cfg: VerlConfig) -> None:
        self.lines = text.splitlines(keepends=True)
        self.path = cfg.path or ""
        self.cfg = cfg
        launch = cfg.launch
        self.last_line = max(launch.override_lines) if launch and launch.override_lines else None

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def _line_of(self, key: str) -> int | None:
        launch = self.cfg.launch
        if launch is not None:  # the script's own override (also one the loader rejected, such as a typo)
            for text, line in zip(reversed(launch.overrides), reversed(launch.override_lines), strict=True):
                if text.split("=", 1)[0].lstrip("+~") == key:
                    return line
        where = self.cfg.where(key) or ""
        prefix = f"{self.path}:"
        if where.startswith(prefix) and where[len(prefix):].isdigit():
            return int(where[len(prefix):])
        return None

    def _word(self, lineno: int, key: str) -> tuple[int, int] | None:
        line = self.lines[lineno - 1]
        pattern = re.compile(r"(?:(?<=\s)|^)['\"]?(?:\+\+|\+|~)?" + re.escape(key) + r"(?=[=\s'\"\\]|$)")
        found = [m.start() for m in pattern.finditer(line)]
        if not found:
            return None
        start = found[-1]
        return start, _word_end(line, start)

    def apply(self, change: Change) -> bool:
        old_key = change.renames or change.key
        lineno = self._line_of(old_key)
        span = self._word(lineno, old_key) if lineno else None
        if change.delete:
            return span is not None and self._remove(lineno, span)  # type: ignore[arg-type]
        word = _shell_word(render_override(change.key, change.new, add=change.add and span is None))
        if span is not None:
            line = self.lines[lineno - 1]  # type: ignore[operator]
            existing = line[span[0]:span[1]].lstrip("'\"")
            value = render_override(change.key, change.new).split("=", 1)[1]
            if "=" in existing and not change.renames:  # the new value as the script spells the old one
                value = respell(change.new, existing.split("=", 1)[1].rstrip("'\"")) or value
            if existing.startswith("+") and not change.renames and not self._in_defaults(change.key):
                # a key verl's defaults lack keeps the '+' (or '++') that adds it
                word = _shell_word(existing.split("=", 1)[0] + "=" + value)
            else:
                word = _shell_word(render_override(change.key, change.new).split("=", 1)[0] + "=" + value)
            self.lines[lineno - 1] = line[:span[0]] + word + line[span[1]:]  # type: ignore[operator]
            return True
        if change.renames:
            return False
        return self._add(word)

    def _in_defaults(self, key: str) -> bool:
        from advisor.verl import default_container, exists

        return exists(default_container(self.cfg.version, self.cfg.config_name), key)

    def _add(self, word: str) -> bool:
        if self.last_line is None:
            return False
        i = self.last_line - 1
        line = self.lines[i]
        if i > 0 and self.lines[i - 1].rstrip("\r\n").endswith("\\"):
            indent = line[: len(line) - len(line.lstrip())]
            self.lines.insert(i, f"{indent}{word} \\\n")
            self.last_line += 1
            return True
        last_override = self.cfg.launch.overrides[-1] if self.cfg.launch else ""
        span = self._word(self.last_line, last_override.split("=", 1)[0].lstrip("+~"))
        if span is None:
            return False
        self.lines[i] = line[: span[1]] + " " + word + line[span[1]:]
        return True

    def _remove(self, lineno: int, span: tuple[int, int]) -> bool:
        line = self.lines[lineno - 1]
        rest = line[: span[0]].rstrip(" \t") + line[span[1]:]
        if rest.strip() in ("", "\\"):
            del self.lines[lineno - 1]
        else:
            self.lines[lineno - 1] = rest if rest.endswith("\n") or not line.endswith("\n") else rest + "\n"
        return True
