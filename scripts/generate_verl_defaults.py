"""Regenerate knowledge/verl_defaults/ from verl's release wheels and a verl git repository.

Usage:
    pip download verl==X --no-deps -d WHEELS   # for every release below
    python scripts/generate_verl_defaults.py --wheels WHEELS --verl-repo VERL_GIT [--check]

For every supported verl version this writes the fully composed default trainer config (FSDP:
ppo_trainer.yaml, Megatron: ppo_megatron_trainer.yaml, and from 0.7.1 one per other ``model_engine`` choice:
ppo_veomni_trainer.yaml, ppo_torchtitan_trainer.yaml, ...) as keys and values only (see
``advisor.verl._source.default_tree``), and ``<config>.dataclass_fields.yaml``: per config node with a
``_target_`` dataclass, the dataclass fields the YAML does not list (verl accepts ``+key=...`` for them).
Releases are read from their wheel on the package index (the exact files users install); ``main`` is read
from the git repository at a pinned commit. Configs are composed with Hydra as verl's entry points compose
them; where verl ships its own flattening ``_generated_<config>.yaml`` the two must agree (up to top-level
group choices such as ``model_engine: dp``), so neither a stale flattening nor a composition slip goes unseen.

No verl code is copied: only keys, values and field names.

``--check`` regenerates into memory and exits 1 if any committed file differs (used by the tests when
the wheels are at hand).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from _generated import write_or_check  # noqa: E402

from advisor.verl import (  # noqa: E402
    GitSource,
    VerlSource,
    WheelSource,
    dataclass_classes,
    default_tree,
    engine_configs,
    extra_fields,
    field_annotations,
    generated_tree,
    text_fields,
)

OUT_DIR = REPO / "knowledge" / "verl_defaults"
CONFIG_NAMES = ("ppo_trainer", "ppo_megatron_trainer")


@dataclass(frozen=True)
class Release:
    version: str
    tag: str
    commit: str  # the tag's commit in verl's repository ("" when the mirror lacks the tag)
    date: str
    wheel: str | None  # file name on the package index; None: read from the git repository at `commit`


RELEASES = [
    Release("0.2.0.post2", "v0.2.0.post2", "fb532783ad3176b4f2a1acbe4f75a5d695b4e0b4", "2025-02-20",
            "verl-0.2.0.post2-py2.py3-none-any.whl"),
    Release("0.3.0.post1", "v0.3.0.post1", "070ed6ac3f6aea13a916556794f34e8f2bde7dde", "2025-04-03",
            "verl-0.3.0.post1-py2.py3-none-any.whl"),
    Release("0.4.1", "v0.4.1", "8d9e350ea58c7ad4b50dd14d9dcb50577242c55f", "2025-06-26",
            "verl-0.4.1-py2.py3-none-any.whl"),
    Release("0.5.0", "v0.5.0", "8fdc4d3f202f41461f4de9f42a637228e342668b", "2025-07-23",
            "verl-0.5.0-py2.py3-none-any.whl"),
    Release("0.6.1", "v0.6.1", "d62da4950573d7a4b7ef2362337952e7ab59e78d", "2025-11-14",
            "verl-0.6.1-py3-none-any.whl"),
    Release("0.7.0", "v0.7.0", "f9c855f7cf04d603c9546bc01776c74806a879c1", "2026-01-05",
            "verl-0.7.0-py3-none-any.whl"),
    Release("0.7.1", "v0.7.1", "bec9ef74768dd201881cd4e54cd0385e87caae27", "2026-03-16",
            "verl-0.7.1-py3-none-any.whl"),
    Release("0.8.0", "v0.8.0", "7aed6b230776f963fa09509c10d9c3a767d1102c", "2026-06-01",
            "verl-0.8.0-py3-none-any.whl"),
    Release("0.9.0", "v0.9.0", "483b8a009ba3a97563edee3a19887e4862b8094a", "2026-08-14",
            "verl-0.9.0-py3-none-any.whl"),
    Release("0.9.1", "v0.9.1", "", "2026-09", "verl-0.9.1-py3-none-any.whl"),
    Release("0.10.0.dev", "main", "1dda039b9c6311889a9c9a26040677e1254814f9", "2026-08-22", None),
]


def _source(rel: Release, wheels: Path, repo: Path | None) -> tuple[VerlSource, str]:
    """The source to read a release from, and how to cite it."""
    if rel.wheel is not None:
        path = wheels / rel.wheel
        if not path.is_file():
            raise SystemExit(f"{path}: missing; run: pip download verl=={rel.version} --no-deps -d {wheels}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return WheelSource(path), f"{rel.wheel} (package index, sha256 {digest[:16]}...)"
    if repo is None:
        raise SystemExit(f"verl {rel.version} is read from git: pass --verl-repo")
    return GitSource(repo, rel.commit), f"verl-project/verl @ {rel.commit}"


def _cross_check(rel: Release, name: str, composed: dict, generated: dict | None) -> None:
    """Hydra's composition must equal verl's own ``_generated_<config>.yaml`` but for top-level group choices
    (``model_engine: dp``, from a ``# @package _global_`` file), which the flattening leaves out."""
    if generated is None:
        return
    differ = {k for k in set(composed) | set(generated) if composed.get(k) != generated.get(k)}
    if any(isinstance(composed.get(k, generated.get(k)), dict) for k in differ):
        raise SystemExit(f"verl {rel.version}: _generated_{name}.yaml differs from Hydra's composition: "
                         f"{sorted(differ)}")


def _render(tree: dict, header: list[str]) -> str:
    lines = [f"# {h}" if h else "#" for h in header]
    return "\n".join(lines) + "\n" + OmegaConf.to_yaml(OmegaConf.create(tree), sort_keys=False)


def generate(wheels: Path, repo: Path | None) -> dict[Path, str]:
    files: dict[Path, str] = {}
    index = ["versions:"]
    for rel in RELEASES:
        source, cited = _source(rel, wheels, repo)
        classes = dataclass_classes(source)
        notes = field_annotations(source)
        engines = [name for name in engine_configs(source) if name not in CONFIG_NAMES]
        for name in (*CONFIG_NAMES, *engines):
            found = default_tree(source, name)
            if found is None:
                raise SystemExit(f"verl {rel.version}: no {name} config in {cited}")
            tree, origin = found
            _cross_check(rel, name, tree, generated_tree(source, name))
            files[OUT_DIR / rel.version / f"{name}.yaml"] = _render(tree, [
                f"verl {rel.version} default config '{name}' (keys and values only; generated, do not edit).",
                f"Source: {cited},",
                f"        {origin}",
                "Regenerate: python scripts/generate_verl_defaults.py --wheels DIR --verl-repo DIR",
            ])
            files[OUT_DIR / rel.version / f"{name}.text_fields.yaml"] = _render(
                {"keys": text_fields(tree, classes, notes)}, [
                    f"verl {rel.version} '{name}': keys with a number default whose dataclass field admits text",
                    f"(annotations read with ast from {cited}; generated, do not edit).",
                ])
            files[OUT_DIR / rel.version / f"{name}.dataclass_fields.yaml"] = _render(extra_fields(tree, classes), [
                f"verl {rel.version} '{name}': dataclass fields the YAML does not list, per config node",
                f"(read with ast from {cited}; generated, do not edit).",
            ])
        configs = ", ".join((*CONFIG_NAMES, *engines))
        index.append(f"  - {{version: '{rel.version}', tag: {rel.tag}, commit: '{rel.commit}', "
                     f"date: '{rel.date}', wheel: {rel.wheel or 'null'}, configs: [{configs}]}}")
    files[OUT_DIR / "versions.yaml"] = (
        "# Supported verl versions, oldest first (generated by scripts/generate_verl_defaults.py).\n"
        "# wheel: the file read from the package index; null: read from verl-project/verl at `commit`.\n"
        + "\n".join(index) + "\n"
    )
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, required=True, help="folder with verl's release wheels")
    parser.add_argument("--verl-repo", type=Path, default=None, help="a git clone of verl-project/verl (for main)")
    parser.add_argument("--check", action="store_true", help="compare with committed files, write nothing")
    args = parser.parse_args()
    files = generate(args.wheels, args.verl_repo)
    return write_or_check(files, REPO, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
