"""Run every command the README and docs show with its output, and compare (or rewrite) the output shown.

A shown example is a fenced block whose info string is ``console``: each line starting with ``$ `` is a
command (a trailing ``\\`` continues it on the next line; ``# ...`` after two spaces is a comment), the lines
after it up to the next command are its output, and ``$ echo $?`` prints the previous command's exit code.
Commands run from the repository root with the argument list ``shlex`` splits (never a shell); ``advisor``
and ``python`` are this interpreter. Output is compared after normalising only what differs between
machines: the repository's absolute path and timings (``1.23 s``).

    python scripts/doc_examples.py            # exit 1 and a unified diff when a shown output is stale
    python scripts/doc_examples.py --update   # rewrite the shown outputs in place
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/*.md", "examples/README.md")
FENCE = re.compile(r"^```console[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
TIMING = re.compile(r"\b\d+(\.\d+)? ?(s|ms|seconds)\b")
TIMEOUT_S = 300


@dataclass
class Step:
    command: str  # as shown, continuation lines joined
    shown: str  # the output shown under it


@dataclass
class Example:
    doc: Path
    start: int  # offset of the block's body in the document
    end: int
    steps: list[Step]

    @property
    def name(self) -> str:
        line = self.doc.read_text(encoding="utf-8").count("\n", 0, self.start) + 1
        where = self.doc.relative_to(REPO) if self.doc.is_relative_to(REPO) else self.doc
        return f"{where}:{line}"


def parse(doc: Path) -> list[Example]:
    text = doc.read_text(encoding="utf-8")
    examples = []
    for m in FENCE.finditer(text):
        steps: list[Step] = []
        pending: list[str] = []  # a command being continued with a trailing backslash
        for line in m.group(1).splitlines():
            if pending or line.startswith("$ "):
                pending.append(line[2:] if not pending else line)
                if line.endswith("\\"):
                    continue
                steps.append(Step(" ".join(p.rstrip("\\").strip() for p in pending), ""))
                pending = []
            elif steps:
                steps[-1].shown += line + "\n"
        examples.append(Example(doc, m.start(1), m.end(1), steps))
    return examples


def documents() -> list[Path]:
    return sorted({p for pattern in DOCS for p in REPO.glob(pattern)})


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    if words[0] == "advisor":
        return [sys.executable, "-m", "advisor", *words[1:]]
    if words[0] in ("python", "python3"):
        return [sys.executable, *words[1:]]
    raise ValueError(f"a shown command must start with advisor or python: {command!r}")


def normalise(text: str) -> str:
    text = text.replace(str(REPO) + "/", "").replace(str(REPO), ".")
    return "\n".join(TIMING.sub("<time>", line.rstrip()) for line in text.splitlines()).strip("\n")


def run(example: Example) -> list[str]:
    """The output of each step, as the block would show it."""
    env = {**os.environ, "NO_COLOR": "1", "ADVISOR_IGNORE_INSTALLED_VERL": "1", "PYTHONPATH": str(REPO)}
    env.pop("COLUMNS", None)
    outputs, last_rc = [], 0
    for step in example.steps:
        if step.command.strip() == "echo $?":
            outputs.append(f"{last_rc}\n")
            continue
        proc = subprocess.run(_argv(step.command), cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
        last_rc = proc.returncode
        outputs.append(proc.stdout + proc.stderr)
    return outputs


def render(example: Example, outputs: list[str]) -> str:
    """The block's body with the given outputs under its commands (commands kept as shown)."""
    text = example.doc.read_text(encoding="utf-8")[example.start:example.end]
    lines, out, i = text.splitlines(), [], 0
    pending = False
    for line in lines:
        if pending or line.startswith("$ "):
            out.append(line)
            pending = line.endswith("\\")
            if not pending:
                out.append(normalise(outputs[i]))
                i += 1
    return "\n".join(o for o in out if o != "") + "\n"


def stale(example: Example, outputs: list[str]) -> list[str]:
    diff = []
    for step, got in zip(example.steps, outputs, strict=True):
        if normalise(step.shown) != normalise(got):
            diff += difflib.unified_diff(normalise(step.shown).splitlines(), normalise(got).splitlines(),
                                         f"{example.name}: $ {step.command} (shown)", "(now)", lineterm="")
    return diff


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="rewrite the shown outputs in place")
    args = parser.parse_args()
    failed = 0
    for doc in documents():
        examples = parse(doc)
        text = doc.read_text(encoding="utf-8")
        for example in reversed(examples):  # from the end, so earlier offsets stay valid
            outputs = run(example)
            if args.update:
                text = text[:example.start] + render(example, outputs) + text[example.end:]
            elif diff := stale(example, outputs):
                failed += 1
                print("\n".join(diff))
        if args.update:
            doc.write_text(text, encoding="utf-8")
    if failed:
        print(f"{failed} shown example(s) differ from what the commands print; "
              "python scripts/doc_examples.py --update rewrites them", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
