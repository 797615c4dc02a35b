"""List the metric names a verl release's RL trainer writes, with file:line, and check them against the catalog.

    python scripts/verl_metric_names.py /work/wheels/x/verl-0.9.1                 # names and where
    python scripts/verl_metric_names.py /work/wheels/x/verl-0.9.1 --check         # names the catalog lacks
    python scripts/verl_metric_names.py git:/work/.mirror/verl-project+verl/repo@v0.8.0 \\
        /work/wheels/x/verl-0.9.1 --diff                                          # added / removed

A source is a directory holding ``verl/`` (an unzipped wheel, a checkout) or ``git:<repo>@<rev>``. The
names come from verl's Python, read with ``ast`` (never imported): string literals and f-strings shaped
like metric names (``{...}`` becomes ``*``; ``--check`` skips those whose first part is one), and
``marked_timer("x")`` stage names (``timing_s/x``, as verl/trainer/ppo/metric_utils.py
compute_timing_metrics writes them), in the files of the RL trainer: the trainers (legacy and V1), the
workers, the loss functions, the agent loop and the helpers they call.
Keys the engine workers write without a prefix (``loss``, ``grad_norm``, ``lr``, ``kl_loss``,
``perf/max_memory_allocated_gb``...) reach the log under ``actor/`` and ``critic/`` (the trainer's
``rename_dict``); where the tree calls ``rename_dict(..., "actor/")`` they are listed so (the actor's
loss functions' keys under ``actor/`` only). A key the trainer renames (``x["perf/mfu/actor"] =
x.pop("actor/mfu")``) is listed under its new name, the agent loop's ``agent_loop/*`` timings under
``timing_s/`` (the legacy trainer merges them into its timings), and a bare prefix (``rollout/moe``) is
dropped.

It is a survey tool: the output is checked by hand (a literal may be a dict key that is never logged);
knowledge/metric_aliases.yaml and knowledge/metrics.yaml are written from what it finds.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# where the RL trainer writes metrics (paths under the repository root; a directory means all of it)
TRAINER_FILES = (
    "verl/trainer/ppo/", "verl/workers/", "verl/utils/debug/metrics.py", "verl/utils/seqlen_balancing.py",
    "verl/utils/metric/", "verl/experimental/agent_loop/", "verl/experimental/reward_loop/",
    "verl/checkpoint_engine/", "verl/trainer/distillation/",
)
SKIPPED = ("/models/", "/third_party/", "/tests/", "verl/workers/rollout/")  # model code, engines' HTTP paths
NAME = re.compile(r"^(\*|[a-z][a-z_@0-9-]*)(/[A-Za-z0-9_@*.-]+)+$")
NOT_METRICS = re.compile(r"^(verl|recipe|http|v1|application|outputs|logs)/|\.(py|yaml|json|jsonl|txt|md)$")
ENGINE_WORKERS = "verl/workers/engine_workers.py"
ENGINE_LOSSES = ("verl/workers/utils/losses.py", "verl/trainer/distillation/losses.py")  # the actor's
AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
BARE_KEY = re.compile(r"""(?:final_metrics|metrics|policy_metrics)\[["']([a-z_][a-z_/0-9]*)["']\]\s*=""")


def _python_files(source: str) -> Iterator[tuple[str, str]]:
    """(path, text) of each trainer .py file of a source."""
    if source.startswith("git:"):
        repo, _, rev = source[4:].rpartition("@")
        names = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", rev, "verl"],
                               capture_output=True, text=True, check=True).stdout.split()
        for name in names:
            if _wanted(name):
                text = subprocess.run(["git", "-C", repo, "show", f"{rev}:{name}"], capture_output=True,
                                      text=True, check=True).stdout
                yield name, text
        return
    root = Path(source)
    for file in sorted((root / "verl").rglob("*.py")):
        name = file.relative_to(root).as_posix()
        if _wanted(name):
            yield name, file.read_text()


def _wanted(path: str) -> bool:
    return path.endswith(".py") and path.startswith(TRAINER_FILES) and not any(s in path for s in SKIPPED)


def _render(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def metric_names(source: str) -> dict[str, list[str]]:
    """Every metric name the trainer files of ``source`` write -> the file:line places it appears."""
    found: dict[str, list[str]] = {}
    prefixes: set[str] = set()
    bare: dict[str, dict[str, tuple[str, ...]]] = {}  # key -> {file:line: the prefixes it gets}
    renamed: dict[str, str] = {}
    for path, text in _python_files(source):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                called = getattr(func, "id", None) or getattr(func, "attr", None)
                first = _render(node.args[0])
                if called == "marked_timer" and first:
                    found.setdefault(f"timing_s/{first}", []).append(f"{path}:{node.lineno}")
                if called == "rename_dict" and len(node.args) > 1:
                    prefix = _render(node.args[1])
                    if prefix:
                        prefixes.add(prefix)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and _is_pop(node.value):
                target = node.targets[0]
                new = _render(target.slice) if isinstance(target, ast.Subscript) else None
                old = _render(node.value.args[0])  # type: ignore[attr-defined]
                if new and old:
                    renamed[old] = new
            text_value = _render(node) if isinstance(node, (ast.Constant, ast.JoinedStr)) else None
            if text_value and NAME.match(text_value) and not NOT_METRICS.search(text_value):
                if path == AGENT_LOOP and text_value.startswith("agent_loop/"):
                    text_value = f"timing_s/{text_value}"
                if path in ENGINE_LOSSES and not text_value.startswith(("actor/", "critic/")):
                    bare.setdefault(text_value, {}).setdefault(f"{path}:{node.lineno}", ("actor/",))
                    continue
                found.setdefault(text_value, []).append(f"{path}:{node.lineno}")
        if path in (ENGINE_WORKERS, *ENGINE_LOSSES):
            roles = ("actor/", "critic/") if path == ENGINE_WORKERS else ("actor/",)
            for lineno, line in enumerate(text.splitlines(), 1):
                if line.lstrip().startswith("#"):
                    continue
                for key in BARE_KEY.findall(line):
                    if not key.startswith(("actor/", "critic/")):
                        bare.setdefault(key, {}).setdefault(f"{path}:{lineno}", roles)
    for key, places in bare.items():
        # never logged bare from these files: the trainer prefixes every key of the worker's metrics
        kept = [p for p in found.pop(key, []) if p not in places]
        if kept:
            found[key] = kept
        for place, roles in places.items():
            for prefix in sorted(prefixes & set(roles)):
                found.setdefault(prefix + key, []).append(f"{place} (+ rename_dict {prefix!r})")
    for old, new in renamed.items():
        if old in found and NAME.match(new):
            found.setdefault(new, []).extend(found.pop(old))
    names = set(found)
    for name in list(found):
        if any(other.startswith(name + "/") for other in names):
            del found[name]  # a prefix that f-strings extend (rollout/moe)
    return dict(sorted(found.items()))


def _is_pop(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop"
            and len(node.args) == 1)


def _uncatalogued(names: dict[str, list[str]]) -> dict[str, list[str]]:
    from advisor.metrics import canonical_metric_name, load_catalog

    catalog = load_catalog()
    out = {}
    for name, places in names.items():
        if name.startswith("*"):
            continue  # the prefix is a variable (log_seqlen_unbalance's prefix, val-core's section)
        if "*" in name and catalog.lookup(name.replace("*", "x")) is not None:
            continue  # an f-string family the catalog covers
        if not catalog.is_known(canonical_metric_name(name)):
            out[name] = places
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="a directory holding verl/, or git:<repo>@<rev>")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="only the names knowledge/metrics.yaml does not know")
    mode.add_argument("--diff", action="store_true", help="names added and removed from one source to the next")
    args = parser.parse_args(argv)
    found = [metric_names(source) for source in args.sources]
    if args.diff:
        pairs = list(zip(args.sources, found, strict=True))
        for (old_source, old), (new_source, new) in pairwise(pairs):
            print(f"== {old_source} -> {new_source}: +{len(set(new) - set(old))} -{len(set(old) - set(new))}")
            for name in sorted(set(new) - set(old)):
                print(f"  + {name}  {', '.join(new[name][:2])}")
            for name in sorted(set(old) - set(new)):
                print(f"  - {name}  {', '.join(old[name][:2])}")
        return 0
    for source, names in zip(args.sources, found, strict=True):
        shown = _uncatalogued(names) if args.check else names
        print(f"== {source}: {len(shown)} {'uncatalogued ' if args.check else ''}name(s)")
        for name, places in shown.items():
            print(f"{name}  {', '.join(places[:3])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
