"""``--write`` keeps a faithful backup and never writes over what it did not read.

Reproducer shapes: a CRLF run.sh (the backup and the file keep their CRLF); a 0600 run.sh holding an API key (the
backup is 0600 too); a dangling ``run.sh.bak`` symlink (the backup is refused, nothing is created where it points);
a save between the read and the write (refused, the save kept, no backup left); a failed write (no backup left,
so the retry works).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor import load_config
from advisor.checks._report import check
from advisor.cli import app
from advisor.diff._edit import edit_for
from advisor.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lr_too_high" / "run.sh"


def _copy(tmp_path: Path, crlf: bool = False, mode: int = 0o644) -> Path:
    path = tmp_path / "run.sh"
    data = EXAMPLE.read_bytes()
    path.write_bytes(data.replace(b"\n", b"\r\n") if crlf else data)
    path.chmod(mode)
    return path


def _edit(path: Path):
    cfg = load_config(path)
    edit = edit_for(cfg, list(check(cfg).changes))
    assert edit is not None and edit.changed
    return edit


def test_a_crlf_file_and_its_backup_keep_their_line_ends(tmp_path: Path) -> None:
    path = _copy(tmp_path, crlf=True)
    original = path.read_bytes()
    backup = _edit(path).write()
    assert backup.read_bytes() == original
    written = path.read_bytes()
    assert written != original and written.count(b"\n") == written.count(b"\r\n")


def test_the_backup_of_a_0600_file_is_0600(tmp_path: Path) -> None:
    path = _copy(tmp_path, mode=0o600)
    result = CliRunner().invoke(app, ["check", str(path), "--write"])
    assert result.exit_code in (0, 1), result.output
    backup = path.with_name("run.sh.bak")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert backup.read_bytes() == EXAMPLE.read_bytes()


def test_a_dangling_backup_link_is_refused_not_followed(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    outside = tmp_path / "elsewhere" / "stolen"
    outside.parent.mkdir()
    path.with_name("run.sh.bak").symlink_to(outside)
    with pytest.raises(ConfigError, match="already exists"):
        _edit(path).write()
    assert not outside.exists()
    assert path.read_bytes() == EXAMPLE.read_bytes()


def test_a_save_between_read_and_write_is_kept(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    edit = _edit(path)
    path.write_bytes(EXAMPLE.read_bytes() + b"# the user's own save\n")
    with pytest.raises(ConfigError, match="changed since it was read"):
        edit.write()
    assert path.read_bytes().endswith(b"# the user's own save\n")
    assert not path.with_name("run.sh.bak").exists()


def test_a_failed_write_leaves_no_backup_and_the_retry_works(tmp_path: Path, monkeypatch) -> None:
    path = _copy(tmp_path)

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device", dst)

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(ConfigError, match="No space left"):
        _edit(path).write()
    assert path.read_bytes() == EXAMPLE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]  # no .bak, no temporary file
    monkeypatch.undo()
    assert _edit(path).write().read_bytes() == EXAMPLE.read_bytes()


def test_a_linked_config_is_edited_where_it_lives(tmp_path: Path) -> None:
    real = _copy(tmp_path)
    (tmp_path / "link").mkdir()
    link = tmp_path / "link" / "run.sh"
    link.symlink_to(real)
    _edit(link).write()
    assert link.is_symlink() and real.read_bytes() != EXAMPLE.read_bytes()
    assert (tmp_path / "link" / "run.sh.bak").read_bytes() == EXAMPLE.read_bytes()
    shutil.rmtree(tmp_path / "link")
