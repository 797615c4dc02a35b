"""The parsed-knowledge cache (advisor/datafiles.py): same values as parsing, keyed by content, never required."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from advisor import datafiles


@pytest.fixture(autouse=True)
def _own_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests clear the in-process memo: each gets a memo of its own, and the suite's is left as it was, so the
    tables other modules built from its objects and cached (advisor.verl's renamed keys) stay the ones
    load_knowledge returns (a test that compares entries by identity, run after this file, failed otherwise)."""
    monkeypatch.setattr(datafiles, "_load", functools.cache(datafiles._load.__wrapped__))
    monkeypatch.setattr(datafiles, "_DIGESTS", dict(datafiles._DIGESTS))


@pytest.fixture()
def knowledge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A knowledge folder of our own and an empty cache folder; the in-process memo cleared."""
    folder = tmp_path / "knowledge"
    folder.mkdir()
    monkeypatch.setattr(datafiles, "knowledge_dir", lambda: folder)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    datafiles.clear_memo()
    yield folder
    datafiles.clear_memo()


def _entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "verl-advisor" / "knowledge").glob("*"))


def test_a_cached_read_equals_the_parse_of_every_shipped_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = Path(str(datafiles.knowledge_dir()))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml"))
    for rel in files:
        datafiles.clear_memo()
        datafiles.load_knowledge(rel)  # writes the entry
        datafiles.clear_memo()
        assert datafiles.load_knowledge(rel) == yaml.safe_load((root / rel).read_text(encoding="utf-8")), rel
    assert len(_entries(tmp_path)) == len({(root / f).read_bytes() for f in files})


def test_a_changed_file_is_parsed_again(knowledge: Path, tmp_path: Path) -> None:
    (knowledge / "a.yaml").write_text("x: 1\n")
    assert datafiles.load_knowledge("a.yaml") == {"x": 1}
    (knowledge / "a.yaml").write_text("x: 2\n")
    datafiles.clear_memo()
    assert datafiles.load_knowledge("a.yaml") == {"x": 2}
    assert len(_entries(tmp_path)) == 2  # one entry per content


def test_a_corrupt_entry_is_parsed_and_rewritten(knowledge: Path, tmp_path: Path) -> None:
    (knowledge / "a.yaml").write_text("x: [1, 2]\n")
    datafiles.load_knowledge("a.yaml")
    (entry,) = _entries(tmp_path)
    entry.write_bytes(b"\x00garbage")
    datafiles.clear_memo()
    assert datafiles.load_knowledge("a.yaml") == {"x": [1, 2]}


def test_no_cache_when_the_folder_cannot_be_written_or_it_is_turned_off(knowledge: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (knowledge / "a.yaml").write_text("x: 1\n")
    (tmp_path / "cache").write_text("a file where the folder would go")
    assert datafiles.load_knowledge("a.yaml") == {"x": 1}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other"))
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    datafiles.clear_memo()
    assert datafiles.load_knowledge("a.yaml") == {"x": 1}
    assert not (tmp_path / "other").exists()


def test_a_file_with_a_date_is_read_but_not_cached(knowledge: Path, tmp_path: Path) -> None:
    (knowledge / "d.yaml").write_text("released: 2025-02-20\n")
    first = datafiles.load_knowledge("d.yaml")
    assert str(first["released"]) == "2025-02-20"
    assert not _entries(tmp_path)


def _count_keys(calls: list[str], name: str) -> int:
    calls.append(name)
    return len(datafiles.load_knowledge(name))


def test_a_derived_value_is_kept_until_a_file_it_read_changes(knowledge: Path, tmp_path: Path) -> None:
    (knowledge / "a.yaml").write_text("x: 1\ny: 2\n")
    (knowledge / "b.yaml").write_text("z: 1\n")
    code = tmp_path / "module.py"
    code.write_text("# the code that derives it\n")
    calls: list[str] = []
    assert datafiles.derived("n", lambda: _count_keys(calls, "a.yaml"), str(code)) == 2
    datafiles.clear_memo()
    assert datafiles.derived("n", lambda: _count_keys(calls, "a.yaml"), str(code)) == 2
    assert calls == ["a.yaml"]  # the second answer came from the cache
    (knowledge / "b.yaml").write_text("z: 2\n")  # a file it did not read
    datafiles.clear_memo()
    assert datafiles.derived("n", lambda: _count_keys(calls, "a.yaml"), str(code)) == 2
    assert calls == ["a.yaml"]
    (knowledge / "a.yaml").write_text("x: 1\n")  # a file it read
    datafiles.clear_memo()
    assert datafiles.derived("n", lambda: _count_keys(calls, "a.yaml"), str(code)) == 1
    assert calls == ["a.yaml", "a.yaml"]


def test_a_derived_value_is_rebuilt_when_its_code_changes(knowledge: Path, tmp_path: Path) -> None:
    (knowledge / "a.yaml").write_text("x: 1\n")
    code = tmp_path / "module.py"
    code.write_text("# version 1\n")
    assert datafiles.derived("n", lambda: 1, str(code)) == 1
    code.write_text("# version 2, longer\n")
    assert datafiles.derived("n", lambda: 2, str(code)) == 2


def test_a_memoised_read_still_counts_as_a_dependency(knowledge: Path, tmp_path: Path) -> None:
    # a file read through a memo before the derivation started is still recorded as read by it
    (knowledge / "a.yaml").write_text("x: 1\n")
    code = tmp_path / "module.py"
    code.write_text("#\n")
    read_a = datafiles.memo(lambda: datafiles.load_knowledge("a.yaml")["x"])
    assert read_a() == 1  # memoised now
    assert datafiles.derived("n", read_a, str(code)) == 1
    (knowledge / "a.yaml").write_text("x: 5\n")
    datafiles.clear_memo()
    assert datafiles.derived("n", lambda: datafiles.load_knowledge("a.yaml")["x"], str(code)) == 5


def test_an_entry_overwritten_by_another_entrys_bytes_is_rebuilt(knowledge: Path, tmp_path: Path) -> None:
    # issue 38: a valid entry copied over another (a sync tool, a user) was read as this file's value
    (knowledge / "a.yaml").write_text("x: 1\n")
    (knowledge / "b.yaml").write_text("- not a mapping\n")
    datafiles.load_knowledge("a.yaml")
    datafiles.load_knowledge("b.yaml")
    first, second = _entries(tmp_path)
    first.write_bytes(second.read_bytes())
    second.write_bytes(first.read_bytes())
    datafiles.clear_memo()
    assert datafiles.load_knowledge("a.yaml") == {"x": 1}
    assert datafiles.load_knowledge("b.yaml") == ["not a mapping"]


def test_every_run_after_the_cache_is_overwritten_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import marshal

    from click.testing import CliRunner

    from advisor.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    check = str(Path(__file__).resolve().parents[2] / "examples" / "check" / "grpo_qwen2.5-7b_gsm8k.sh")
    datafiles.clear_memo()
    first = CliRunner().invoke(app, ["check", check, "--format", "json"])
    entries = sorted((tmp_path / "cache").rglob("*.m*"))
    assert entries
    for entry in entries:  # every entry, derived ones included, now holds well-formed marshal of the wrong shape
        entry.write_bytes(marshal.dumps(("x", 42)))
    for _ in range(2):  # the run that rebuilds them, and the one after it
        datafiles.clear_memo()
        again = CliRunner().invoke(app, ["check", check, "--format", "json"])
        assert (again.exit_code, again.stdout) == (first.exit_code, first.stdout)
    datafiles.clear_memo()


def test_a_relative_xdg_cache_home_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the XDG Base Directory spec: a relative path in these variables is invalid and ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert datafiles._cache_dir(None, "relative/cache", str(tmp_path / "home")) == \
        tmp_path / "home" / ".cache" / "verl-advisor" / "knowledge"
    assert datafiles._cache_dir(None, str(tmp_path / "abs"), None) == tmp_path / "abs" / "verl-advisor" / "knowledge"
