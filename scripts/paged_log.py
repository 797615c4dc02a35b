"""Rebuild a published log that the file index hands out only 16,000 characters a page (bench/published_runs/
SOURCE.md, "The four paged logs").

Each page's ``text`` (from ``read_file``) is kept in DIR/OOOOOOO.jstr exactly as it appeared between its JSON
quotes (OOOOOOO: the page's offset, 7 digits). The index hides a log's ANSI colour codes but counts them in its
offsets, so a page's visible length is 16,000 less 9 characters per Ray line prefix ``(Name pid=N)`` or
``[repeated Nx across cluster]`` tag (``ESC[36m`` ... ``ESC[0m``), give or take a code cut by the page edge; other
codes (the dashboard banner, a progress bar's carriage returns) may hide up to ``SLACK`` more.

    python scripts/paged_log.py check DIR OFFSET TOTAL   one page: OK or FAIL, with the characters unexplained
    python scripts/paged_log.py join DIR TOTAL OUT        every page checked, joined, the step lines checked
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

PAGE = 16_000
CODE = 9  # ESC[36m + ESC[0m around one prefix or tag
SLACK = 200  # other hidden codes a page may hold (the banner's 19 characters, progress bars)
EDGE = 12  # a code cut by the page edge leaves up to this many characters on the wrong side
_PREFIX = re.compile(r"\((?:[A-Za-z_]\w* )?pid=\d+(?:, ip=[0-9.]+)?\)|\[repeated \d+x across cluster\]")
_CUT_CODE = re.compile(r"\x1b?\[\d{1,2}(?:;\d{1,2})*m")  # the visible pieces of a code a page edge cut
_VALUE = re.compile(r"[\w/@.\-:()]+:-?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|nan|inf|-inf)")


def page_text(folder: Path, offset: int) -> str:
    raw = (folder / f"{offset:07d}.jstr").read_text(encoding="utf-8").rstrip("\n")  # no raw LF in a JSON string
    return json.loads(f'"{raw}"')


def check_page(text: str, offset: int, total: int) -> tuple[bool, str]:
    """Whether one page's visible text has the length its offset and the hidden colour codes allow."""
    want = min(PAGE, total - offset)
    expect = want - CODE * len(_PREFIX.findall(text))
    ok = expect - SLACK <= len(text) <= expect + EDGE
    return ok, f"{'OK' if ok else 'FAIL'} page {offset}: {len(text)} characters, about {expect} expected, " \
               f"{expect - len(text)} unexplained"


def check_steps(text: str) -> list[str]:
    """Problems of the step lines: a line that does not parse, a step missing or repeated, a training step
    without the keys the others log."""
    problems, steps, keys = [], [], []
    for line in text.splitlines():
        match = re.search(r"step:(\d+) - (.*)$", line)
        if not match:
            continue
        parts = match.group(2).split(" - ")
        problems += [f"step {match.group(1)}: cannot read {p!r}" for p in parts if not _VALUE.fullmatch(p)]
        steps.append(int(match.group(1)))
        keys.append(frozenset(p.rsplit(":", 1)[0] for p in parts))
    problems += [f"step {a} is followed by {b}" for a, b in pairwise(steps) if b != a + 1]
    typical = Counter(keys).most_common(1)[0][0] if keys else frozenset()
    problems += [f"step {s} lacks {sorted(typical - k)[:3]}" for s, k in zip(steps, keys, strict=True)
                 if 0 < len(typical - k) < len(typical) / 2]  # a validation-only step lacks most of them
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("check")
    one.add_argument("folder", type=Path)
    one.add_argument("offset", type=int)
    one.add_argument("total", type=int)
    join = sub.add_parser("join")
    join.add_argument("folder", type=Path)
    join.add_argument("total", type=int)
    join.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "check":
        ok, line = check_page(page_text(args.folder, args.offset), args.offset, args.total)
        print(line)
        return 0 if ok else 1
    texts = []
    for offset in range(0, args.total, PAGE):
        if not (args.folder / f"{offset:07d}.jstr").exists():
            print(f"{args.folder}: page {offset} missing", file=sys.stderr)
            return 2
        text = page_text(args.folder, offset)
        ok, line = check_page(text, offset, args.total)
        if not ok:
            print(f"{args.folder}: {line}", file=sys.stderr)
            return 2
        texts.append(text)
    text = _CUT_CODE.sub("", "".join(texts))
    problems = check_steps(text)
    for problem in problems:
        print(problem)
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(text)} characters, {len(problems)} step-line problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
