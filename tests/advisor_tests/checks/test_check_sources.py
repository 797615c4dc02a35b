"""Every verl file a check cites exists in each version the check applies to, with the lines it cites.

knowledge/check_sources.yaml (scripts/generate_check_sources.py, from the release wheels and verl main's git
mirror) records which cited files each version has and their length, so this runs in CI without the wheels;
where the wheels are here, the file is checked to be current.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.checks import CHECKS
from advisor.checks._citations import Citation, citations
from advisor.datafiles import load_knowledge
from advisor.verl._defaults import version_names

REPO = Path(__file__).resolve().parents[3]
WHEELS = Path("/work/wheels")
MIRROR = Path("/work/.mirror/verl-project+verl/repo")
DATA = load_knowledge("check_sources.yaml")


def _problems(cite: Citation, version: str) -> Iterator[str]:
    """Why a citation made for ``version`` is wrong (nothing when it is right)."""
    if cite.is_doc:
        targets = [("verl main's docs", DATA["lines"]["docs"])]
    else:
        targets = [(v, DATA["lines"].get(v)) for v in cite.versions or (version,)]
    for where, lines in targets:
        if lines is None:
            yield f"names verl {where}, which is not a supported version"
        elif cite.path not in lines:
            yield f"{cite.path} does not exist in {where}"
        elif cite.last_line is not None and cite.last_line > lines[cite.path]:
            yield f"{cite.path}:{cite.last_line} is past the end of the file in {where} ({lines[cite.path]} lines)"


def test_every_cited_file_is_in_the_generated_data():
    cited = {c.path for check in CHECKS for src in (check.source, *(s for _, s in check.sources))
             for c in citations(src)}
    missing = sorted(cited - set(DATA["cited"]))
    assert not missing, f"run scripts/generate_check_sources.py: new citations {missing}"


def test_each_check_cites_files_its_versions_have():
    problems = []
    for check in CHECKS:
        for version in version_names():
            if not check.applies_to(version):
                continue
            for cite in citations(check.source_for(version)):
                problems.extend(f"{check.id} on {version}: {why}" for why in _problems(cite, version))
    assert not problems, "\n".join(dict.fromkeys(problems))


def test_a_check_without_a_verl_file_is_one_verl_never_enforces():
    """Checks that cite no verl file: docs-based advice, the advisor's own thresholds, the inference engine."""
    bare = {c.id for c in CHECKS if not any(not x.is_doc for v in version_names() for x in citations(c.source_for(v)))}
    assert bare <= {"W005", "W007", "W011", "W013", "R005", "R102", "R103", "B104"}, bare


def test_cited_lines_name_the_version_they_are_from():
    """Line numbers move between releases: a file:line names its version(s), '(0.8.0, 0.9.1)'."""
    bare = [f"{check.id}: {cite.path}:{cite.last_line}" for check in CHECKS
            for src in (check.source, *(s for _, s in check.sources)) for cite in citations(src)
            if cite.last_line is not None and not cite.versions and not cite.is_doc]
    assert not bare, bare


@pytest.mark.parametrize(("text", "expected"), [
    ("verl/utils/config.py:88-124 (0.9.1)", Citation("verl/utils/config.py", ("0.9.1",), 124)),
    ("verl/utils/config.py:89-113 (0.6.1, 0.8.0) (validate_config)",
     Citation("verl/utils/config.py", ("0.6.1", "0.8.0"), 113)),
    ("0.9.1 verl/workers/config/engine.py:217,306,677", Citation("verl/workers/config/engine.py", ("0.9.1",), 677)),
    ("v0.4.1 verl/trainer/ppo/ray_trainer.py:461-467", Citation("verl/trainer/ppo/ray_trainer.py", ("0.4.1",), 467)),
    ("verl/trainer/ppo/core_algos.py (register_adv_est)", Citation("verl/trainer/ppo/core_algos.py", (), None)),
    ("docs/perf/best_practices.rst:138-139 @1dda039b", Citation("docs/perf/best_practices.rst", (), 139)),
])
def test_citations_parse_path_version_and_last_line(text, expected):
    assert citations(text) == [expected]


def test_relative_or_advisor_sources_are_not_verl_files():
    assert citations("critic.py:114-126; knowledge/check_thresholds.yaml (response_length)") == []


@pytest.mark.skipif(not list(WHEELS.glob("verl-0.9.1-*.whl")) or not MIRROR.is_dir(),
                    reason="verl's release wheels (/work/wheels) or its git mirror are not on this machine")
def test_generated_data_is_current():
    spec = importlib.util.spec_from_file_location("generate_check_sources",
                                                  REPO / "scripts" / "generate_check_sources.py")
    assert spec is not None
    done = subprocess.run([sys.executable, spec.origin or "", "--check"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
