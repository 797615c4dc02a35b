"""Write generated files, or (``--check``) report the committed ones that differ: shared by the generators."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_or_check(files: Mapping[Path, str], repo: Path, *, check: bool) -> int:
    """Exit status: with ``check``, 1 when a committed file is missing or differs (each printed); else 0."""
    if check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"stale: {p.relative_to(repo)}")
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files)} files")
    return 0
