"""Regenerate docs/img/report.png, the README's screenshot of `advisor report`.

Renders the report of a bundled example (kl_spike_loss on an H100-80GB) and photographs it with
headless chromium (Debian's `chromium` package), offline and with a throw-away profile.

    python scripts/make_report_screenshot.py [--example kl_spike_loss] [--size 1400,1900] [--out docs/img/report.png]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout, not whatever `advisor` is installed

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=15000", "--hide-scrollbars")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", default="kl_spike_loss")
    parser.add_argument("--gpu", default="H100-80GB")
    parser.add_argument("--size", default="1400,1900", help="browser window WIDTH,HEIGHT in pixels")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "report.png")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found; install Debian's `chromium` package", file=sys.stderr)
        return 2

    from advisor import load_config
    from advisor.report import build_report, write_html

    example = REPO / "examples" / args.example
    report = build_report(load_config(example / "run.sh"), example / "metrics.jsonl", gpu=args.gpu)
    report.config_path = f"examples/{args.example}/run.sh"  # repository-relative in the picture
    report.metrics_path = f"examples/{args.example}/metrics.jsonl"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="advisor-screenshot-") as tmp:
        page = write_html(report, Path(tmp) / "report.html")
        subprocess.run([browser, *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={args.size}",
                        f"--screenshot={args.out.resolve()}", page.as_uri()], check=True, capture_output=True,
                       timeout=180)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
