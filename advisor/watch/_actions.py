"""What an alert does: a line (text) or a JSON object (json) on stdout, and the ``--on-alert`` commands.

A command is an argument list run without a shell; the alert goes to its stdin as one JSON document, its
output to the watcher's stderr (stdout stays the watcher's own, one event per line). A command that is
missing, fails or outlasts ``COMMAND_TIMEOUT_S`` costs a warning on stderr, never the watch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, TextIO

COMMAND_TIMEOUT_S = 60.0


def render_text(payload: dict[str, Any]) -> str:
    step, kind = payload["step"], payload["event"]
    if kind == "error":
        return f"step {step}: ERROR {payload['error']}"
    if kind == "cleared":
        return f"step {step}: cleared {payload['id']} (alerted since step {payload['onset_step']})"
    d = payload["diagnosis"]
    head = "ALERT" if kind == "alert" else "WORSE"
    lines = [f"step {step}: {head} {d['severity']} {d['id']} {d['name']}: {d['summary']}"
             f" (found since step {payload['onset_step']})"]
    for e in d.get("evidence", [])[:4]:
        value = "n/a" if e.get("value") is None else f"{e['value']:.4g}"
        early = "" if e.get("early") is None else f" (early {e['early']:.4g})"
        lines.append(f"    {e['metric']} = {value}{early}")
    diff = payload["suggest"]
    if diff["overrides"]:
        lines.append(f"    diff: {' '.join(diff['overrides'])} (decided by {diff['decided_by']})")
    elif diff["decided_by"]:
        lines.append(f"    no config diff: {diff['decided_by']}'s remedy is outside the config; see its checks")
    return "\n".join(lines)


def emit(payload: dict[str, Any], fmt: str, out: TextIO) -> None:
    out.write((json.dumps(payload, separators=(",", ":")) if fmt == "json" else render_text(payload)) + "\n")
    out.flush()


def run_command(argv: Sequence[str], payload: dict[str, Any], *, err: TextIO | None = None) -> int | None:
    """Run one ``--on-alert`` command with the alert on stdin; its exit code, None when it could not run."""
    err = err or sys.stderr
    data = json.dumps(payload).encode("utf-8")
    try:
        done = subprocess.run(list(argv), input=data, capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except FileNotFoundError:
        print(f"advisor watch: --on-alert command not found: {argv[0]}", file=err)
        return None
    except subprocess.TimeoutExpired:
        print(f"advisor watch: --on-alert command {argv[0]} ran past {COMMAND_TIMEOUT_S:.0f} s; stopped", file=err)
        return None
    except OSError as exc:
        print(f"advisor watch: --on-alert command {argv[0]} could not run ({exc.strerror or exc})", file=err)
        return None
    for stream in (done.stdout, done.stderr):
        if stream:
            err.write(stream.decode("utf-8", errors="replace"))
    if done.returncode != 0:
        print(f"advisor watch: --on-alert command {argv[0]} exited with {done.returncode}", file=err)
    return done.returncode
