"""A rule judges a metric against the healthy band of the metrics catalog (``healthy: {metric: catalog}``) unless
its file says, in a comment above its own band, why not."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from advisor.metrics import load_catalog
from advisor.playbook import load_playbook

RULES = Path(__file__).resolve().parents[3] / "knowledge" / "rules"


def _own_bands() -> list[tuple[str, str, str | None]]:
    """(rule file, metric, the comment line above its band) for each band a rule file writes itself."""
    out = []
    for path in sorted(RULES.glob("*/*.yaml")):
        lines = path.read_text(encoding="utf-8").splitlines()
        bands = yaml.safe_load("\n".join(lines)).get("healthy") or {}
        for metric, band in bands.items():
            if band == "catalog":
                continue
            at = next(i for i, line in enumerate(lines) if re.match(rf"^\s+{re.escape(metric)}:", line))
            above = lines[at - 1].strip()
            out.append((path.name, metric, above if above.startswith("#") else None))
    return out


def test_a_band_of_its_own_says_why_when_the_catalog_has_one() -> None:
    catalog = load_catalog().metrics
    silent = [(name, metric) for name, metric, comment in _own_bands()
              if catalog.get(metric) is not None and catalog[metric].healthy is not None and comment is None]
    assert not silent, silent


def test_catalog_bands_are_the_catalogs() -> None:
    catalog = load_catalog().metrics
    taken = 0
    for path in sorted(RULES.glob("*/*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        rule = next(r for r in load_playbook() if r.id == raw["id"])
        for metric, band in (raw.get("healthy") or {}).items():
            if band == "catalog":
                want = catalog[metric].healthy
                assert rule.healthy[metric] == {"low": want.low, "high": want.high, "source": want.source}
                taken += 1
    assert taken >= 14  # the 14 bands 13 rule files copied from the catalog before (issue #39)
