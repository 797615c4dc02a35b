"""Generate knowledge/verl_enums.yaml: the values verl accepts for its enumerated config keys, per version.

Read from verl's own source with ``ast`` (never imported): the AdvantageEstimator enum and the
``register_adv_est`` names, the ``register_policy_loss`` names (and the built-in ``loss_mode``
branches of older actors), the loss aggregation modes, and the rollout engine names. Each list is
recorded with the file:line range it was read from.

    python scripts/generate_verl_enums.py            # write knowledge/verl_enums.yaml
    python scripts/generate_verl_enums.py --check    # exit 1 if the file is out of date

Sources: the unzipped release wheels under $VERL_WHEELS (default /work/wheels/x/verl-<version>/) and
verl main from the bare git mirror $VERL_MIRROR (default /work/.mirror/verl-project+verl/repo), named
0.10.0.dev as in knowledge/verl_defaults.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from _generated import write_or_check  # noqa: E402

OUT = REPO / "knowledge" / "verl_enums.yaml"
WHEELS = Path(os.environ.get("VERL_WHEELS", "/work/wheels/x"))
MIRROR = Path(os.environ.get("VERL_MIRROR", "/work/.mirror/verl-project+verl/repo"))
MAIN_NAME = "0.10.0.dev"

Reader = Callable[[str], "str | None"]
Found = list[tuple[str, int]]  # (value, line)


def _strings_compared(tree: ast.AST, names: tuple[str, ...]) -> Found:
    """Values in ``<...name> == "value"`` / ``in ("a", "b")`` comparisons whose left side ends with a name."""
    out: Found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not isinstance(node.ops[0], (ast.Eq, ast.In)):
            continue
        left = ast.unparse(node.left)
        if not any(left == n or left.endswith("." + n) for n in names):
            continue
        right = node.comparators[0]
        items = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
        out.extend((i.value, i.lineno) for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))
    return out


def _decorator_names(tree: ast.AST, func: str) -> Found:
    out: Found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append((arg.value, node.lineno))
    return out


def _enum_values(tree: ast.AST, cls: str) -> Found:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [(stmt.value.value, stmt.lineno) for stmt in node.body
                    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)]
    return []


def _list_assigned(tree: ast.AST, name: str) -> Found:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == name for t in node.targets) and \
                isinstance(node.value, (ast.List, ast.Tuple)):
            return [(e.value, e.lineno) for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


def _registry_keys(tree: ast.AST, name: str) -> Found:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == name for t in node.targets) and \
                isinstance(node.value, ast.Dict):
            out: Found = []
            for key in node.value.keys:
                first = key.elts[0] if isinstance(key, ast.Tuple) else key
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    out.append((first.value, first.lineno))
            return out
    return []


# key -> the readers tried in order; the first that finds values is the version's source
# (file, how to read it)
ENUMS: dict[str, tuple[str, list[tuple[str, Callable[[ast.AST], Found]]]]] = {
    "adv_estimator": ("algorithm.adv_estimator", [
        ("verl/trainer/ppo/core_algos.py", lambda t: _enum_values(t, "AdvantageEstimator")
         + [(v, n) for v, n in _decorator_names(t, "register_adv_est")]),
        ("verl/trainer/ppo/ray_trainer.py", lambda t: _enum_values(t, "AdvantageEstimator")
         or _strings_compared(t, ("adv_estimator",))),
    ]),
    "policy_loss": ("actor_rollout_ref.actor.policy_loss.loss_mode", [
        ("verl/trainer/ppo/core_algos.py", lambda t: _decorator_names(t, "register_policy_loss")),
        ("verl/workers/actor/dp_actor.py", lambda t: _strings_compared(t, ("loss_mode",))),
    ]),
    "loss_agg_mode": ("actor_rollout_ref.actor.loss_agg_mode", [
        ("verl/workers/config/actor.py", lambda t: _list_assigned(t, "valid_loss_agg_modes")),
        ("verl/trainer/ppo/core_algos.py", lambda t: _strings_compared(t, ("loss_agg_mode",))),
    ]),
    "rollout_name": ("actor_rollout_ref.rollout.name", [
        ("verl/workers/rollout/base.py", lambda t: _registry_keys(t, "_ROLLOUT_REGISTRY")),
        ("verl/workers/fsdp_workers.py", lambda t: _strings_compared(t, ("rollout_name", "rollout.name"))),
    ]),
}
# the two readers whose results add up (registered names and the built-in branches of older actors); for the
# others the first reader that finds values is authoritative (0.6+ builds rollouts only from _ROLLOUT_REGISTRY)
UNION = {"policy_loss"}


def _versions() -> Iterator[tuple[str, Reader]]:
    for wheel in sorted(WHEELS.glob("verl-*")):
        root = wheel / "verl"
        if not root.is_dir():
            continue

        def read(path: str, root: Path = wheel) -> str | None:
            file = root / path
            return file.read_text(encoding="utf-8") if file.is_file() else None

        yield wheel.name.removeprefix("verl-"), read
    if MIRROR.is_dir():
        def read_main(path: str) -> str | None:
            proc = subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{path}"], capture_output=True, text=True)
            return proc.stdout if proc.returncode == 0 else None

        yield MAIN_NAME, read_main


def _commit() -> str:
    proc = subprocess.run(["git", "-C", str(MIRROR), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip()


def _version_sort(name: str) -> Version:
    return Version(name)  # PEP 440, as advisor/verl/_version.py orders verl's versions


def generate() -> dict:
    versions: dict[str, dict] = {}
    for name, read in _versions():
        entry: dict[str, dict] = {}
        for enum, (key, readers) in ENUMS.items():
            values: list[str] = []
            sources: list[str] = []
            for path, reader in readers:
                text = read(path)
                if text is None:
                    continue
                found = reader(ast.parse(text))
                if not found:
                    continue
                values.extend(v for v, _ in found if v not in values)
                lines = [n for _, n in found]
                span = f"{min(lines)}-{max(lines)}" if min(lines) != max(lines) else str(min(lines))
                sources.append(f"{path}:{span}")
                if enum not in UNION:
                    break
            if enum == "policy_loss" and values and "vanilla" not in values:
                # before the registry covered it, 'vanilla' was the actor's own branch (the default value)
                values.insert(0, "vanilla")
            if values:
                entry[enum] = {"key": key, "values": values, "source": "; ".join(sources)}
        versions[name] = entry
    return {"generated_by": "scripts/generate_verl_enums.py", "verl_main_commit": _commit(),
            "versions": dict(sorted(versions.items(), key=lambda kv: _version_sort(kv[0])))}


def render(data: dict) -> str:
    head = ("# Values verl accepts for its enumerated config keys, per version, read from verl's source.\n"
            "# Generated by scripts/generate_verl_enums.py; do not edit by hand.\n")
    return head + yaml.safe_dump(data, sort_keys=False, width=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    args = parser.parse_args()
    return write_or_check({OUT: render(generate())}, REPO, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
