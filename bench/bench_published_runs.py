"""`advisor suggest LOG` on the published verl runs of bench/published_runs/ (the log alone: no config given).

    python bench/bench_published_runs.py [-v]

Each case of bench/published_runs/corpus.yaml is a console log its authors published as a reference result
(SOURCE.md: where each comes from, and the line of verl's docs/algo/baseline.md that links it). The log is
unpacked to a temporary folder and given to `advisor suggest LOG --format json` in a subprocess, as a user would:
the config is the one the log printed, its set -x trace or its pasted launch command.

A case is read when suggest exits 0 with a verdict. A case the source publishes as a reference (``expect: no
change``) is right when suggest proposes no config change (verdict "no change", or "inspect": a finding whose
remedy is outside the config); a case where a change is defensible (``expect:
defensible``, with why) is scored apart: right when the change it proposes touches the key named there.

Ends with exactly:

    published runs: read N/M
    published runs: no change N/M
    published runs: defensible change N/M
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "published_runs"
REPO = HERE.parent


def _suggest(log: Path) -> tuple[dict | None, str]:
    """suggest's JSON document for ``log`` (None when it did not run), and its stderr's last line."""
    proc = subprocess.run([sys.executable, "-m", "advisor", "suggest", str(log), "--format", "json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return json.loads(proc.stdout), ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per case")
    args = parser.parse_args()
    cases = yaml.safe_load((CORPUS / "corpus.yaml").read_text())["cases"]
    read = quiet = quiet_total = defensible = defensible_total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            log = Path(tmp) / case["file"].removesuffix(".gz")
            with gzip.open(CORPUS / case["file"], "rb") as src, log.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            document, error = _suggest(log)
            keys = [c["key"] for c in document["changes"]] if document else []
            if document is not None:
                read += 1
            if case["expect"] == "defensible":
                defensible_total += 1
                right = document is not None and case["change"] in keys
                defensible += right
            else:
                quiet_total += 1
                right = document is not None and not keys
                quiet += right
            if args.verbose:
                verdict = error or f"{document['verdict']} ({document['decided_by'] or '-'}) {' '.join(keys)}"
                print(f"{'ok ' if right else 'BAD'} {case['expect']:<10} {case['file']}: {verdict}")
    print(f"published runs: read {read}/{len(cases)}")
    print(f"published runs: no change {quiet}/{quiet_total}")
    print(f"published runs: defensible change {defensible}/{defensible_total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
