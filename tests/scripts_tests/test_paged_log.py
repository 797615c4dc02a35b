"""scripts/paged_log.py: a page copied from the file index is checked against 16,000 characters less the colour codes
the index hides (9 per Ray prefix), and a joined log's step lines are checked for a missing step or key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "paged_log.py"


def _write_page(folder: Path, offset: int, text: str) -> None:
    # as read_file shows it: the JSON string's body, escapes kept
    (folder / f"{offset:07d}.jstr").write_text(json.dumps(text)[1:-1], encoding="utf-8")


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


KEYS = ("actor/pg_loss", "actor/entropy", "actor/grad_norm", "critic/score/mean")


def _line(step: int, keys: tuple[str, ...] = KEYS) -> str:
    return "(TaskRunner pid=7) step:" + str(step) + " - " + " - ".join(f"{k}:0.5" for k in keys) + "\n"


def test_a_page_is_short_by_nine_characters_a_coloured_prefix(tmp_path: Path) -> None:
    body = "".join(_line(s) for s in range(1, 4))  # three prefixes: 27 hidden characters
    total = len(body) + 3 * 9
    _write_page(tmp_path, 0, body)
    assert _run("check", tmp_path, 0, total).returncode == 0
    _write_page(tmp_path, 0, body[:-300])  # a page that lost 300 characters in copying
    assert _run("check", tmp_path, 0, total).returncode == 1


def test_a_missing_step_or_key_is_named(tmp_path: Path) -> None:
    lines = [_line(1), _line(2), _line(4), _line(5, KEYS[:3]), _line(6)]
    body = "".join(lines)
    _write_page(tmp_path, 0, body)
    proc = _run("join", tmp_path, len(body) + 9 * len(lines), tmp_path / "out.log")
    assert proc.returncode == 1
    assert "step 2 is followed by 4" in proc.stdout
    assert "step 5 lacks ['critic/score/mean']" in proc.stdout
    assert (tmp_path / "out.log").read_text(encoding="utf-8") == body
