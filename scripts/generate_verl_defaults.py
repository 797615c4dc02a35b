"""Regenerate knowledge/verl_defaults/ from a copy of verl's config YAMLs.

Usage:
    python scripts/generate_verl_defaults.py [--reference ../shared/verl-reference] [--check]

For every supported verl version this writes the fully composed default trainer config
(FSDP: ppo_trainer.yaml, Megatron: ppo_megatron_trainer.yaml) as keys and values only: comments,
the Hydra ``defaults`` list and ``hydra:`` settings are dropped; ``${...}`` interpolations are kept
verbatim so that a user's override of a source key still flows into the keys that follow it, exactly
as in verl.

Sources (see ../shared/verl-reference/SOURCE.md for commits):
- v0.5.0 and later ship ``_generated_ppo_*trainer.yaml`` (verl's own flattening via
  scripts/generate_trainer_config.sh); for the current main we also compose ppo_trainer.yaml with
  Hydra and require the result to equal the generated file.
- v0.4.1 has one monolithic ppo_trainer.yaml with no defaults list.
- The DAPO recipe overlay (recipe/dapo/config/dapo_trainer.yaml at v0.7.0) is written once to
  recipes/dapo_trainer.yaml; it is composed on top of the chosen version's ppo_trainer at load time.

With ``--verl-repo`` (a git clone of volcengine/verl) it also writes ``dataclass_fields.yaml`` per
version: for each config node with a ``_target_`` dataclass, the dataclass fields the YAML does not
list. verl accepts those keys (``+key=...``), so the advisor must not call them unknown. They are
read from verl's Python with ``ast`` at the version's commit; no verl code is copied.

``--check`` regenerates into memory and exits 1 if any committed file differs (used by the tests).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "knowledge" / "verl_defaults"


@dataclass(frozen=True)
class VersionSource:
    version: str
    tag: str
    commit: str
    date: str
    config_dir: str  # relative to the reference root
    generated: bool  # whether _generated_*.yaml exist


VERSIONS = [
    VersionSource("0.4.1", "v0.4.1", "8d9e350ea58c7ad4b50dd14d9dcb50577242c55f", "2025-06-26",
                  "versions/v0.4.1/verl/trainer/config", False),
    VersionSource("0.5.0", "v0.5.0", "8fdc4d3f202f41461f4de9f42a637228e342668b", "2025-07-23",
                  "versions/v0.5.0/verl/trainer/config", True),
    VersionSource("0.6.1", "v0.6.1", "d62da4950573d7a4b7ef2362337952e7ab59e78d", "2025-11-14",
                  "versions/v0.6.1/verl/trainer/config", True),
    VersionSource("0.7.0", "v0.7.0", "f9c855f7cf04d603c9546bc01776c74806a879c1", "2026-01-05",
                  "versions/v0.7.0/verl/trainer/config", True),
    VersionSource("0.8.0.dev", "main", "b178a3cd56f58b2d502255daba591e92833930a7", "2026-01-29",
                  "verl/trainer/config", True),
]
DAPO_OVERLAY = ("v0.7.0/recipe/dapo/config/dapo_trainer.yaml", "f9c855f7cf04d603c9546bc01776c74806a879c1")
CONFIG_NAMES = ("ppo_trainer", "ppo_megatron_trainer")


def _strip_hydra(cfg: DictConfig) -> DictConfig:
    container = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(container, dict)
    container.pop("defaults", None)
    container.pop("hydra", None)
    return OmegaConf.create(container)


def _compose_with_hydra(config_dir: Path, name: str) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name=name)
    return _strip_hydra(cfg)


def _load_default(ref: Path, src: VersionSource, name: str) -> DictConfig:
    config_dir = ref / src.config_dir
    if src.generated:
        cfg = _strip_hydra(OmegaConf.load(config_dir / f"_generated_{name}.yaml"))
        if src.tag == "main" and name == "ppo_trainer":
            composed = _compose_with_hydra(config_dir, name)
            if OmegaConf.to_container(composed) != OmegaConf.to_container(cfg):
                raise SystemExit(f"{config_dir}: _generated_{name}.yaml differs from Hydra's composition")
        return cfg
    return _strip_hydra(OmegaConf.load(config_dir / f"{name}.yaml"))


def _render(cfg: DictConfig, header: list[str]) -> str:
    lines = [f"# {h}" if h else "#" for h in header]
    return "\n".join(lines) + "\n" + OmegaConf.to_yaml(cfg, sort_keys=False)


_CONFIG_SOURCES = ("verl/workers/config", "verl/trainer/config", "verl/utils/profiler")


def _dataclass_fields(repo: Path, commit: str) -> dict[str, tuple[list[str], list[str]]]:
    """class name -> (its annotated field names, its base class names), for verl's config modules."""
    import ast
    import subprocess

    listing = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", commit, *_CONFIG_SOURCES],
                             capture_output=True, text=True, check=True).stdout.split()
    classes: dict[str, tuple[list[str], list[str]]] = {}
    for path in (p for p in listing if p.endswith(".py")):
        source = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True,
                                text=True, check=True).stdout
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                fields = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
                          and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")]
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                classes[node.name] = (fields, bases)
    return classes


def _all_fields(name: str, classes: dict[str, tuple[list[str], list[str]]], seen: frozenset[str] = frozenset()
                ) -> list[str]:
    if name not in classes or name in seen:
        return []
    fields, bases = classes[name]
    inherited = [f for b in bases for f in _all_fields(b, classes, seen | {name})]
    return list(dict.fromkeys(inherited + fields))


def _extra_fields(tree: DictConfig, classes: dict[str, tuple[list[str], list[str]]]) -> dict[str, list[str]]:
    container = OmegaConf.to_container(tree, resolve=False)
    out: dict[str, list[str]] = {}

    def walk(node: object, path: str) -> None:
        if not isinstance(node, dict):
            return
        target = node.get("_target_")
        if isinstance(target, str):
            extra = [f for f in _all_fields(target.rsplit(".", 1)[-1], classes) if f not in node]
            if extra:
                out[path] = sorted(extra)
        for key, value in node.items():
            walk(value, f"{path}.{key}" if path else str(key))

    walk(container, "")
    return out


def generate(ref: Path, repo: Path | None = None) -> dict[Path, str]:
    files: dict[Path, str] = {}
    index = ["versions:"]
    for src in VERSIONS:
        for name in CONFIG_NAMES:
            cfg = _load_default(ref, src, name)
            origin = f"_generated_{name}.yaml" if src.generated else f"{name}.yaml"
            header = [
                f"verl {src.version} default config '{name}' (keys and values only; generated, do not edit).",
                f"Source: volcengine/verl {src.tag} @ {src.commit} ({src.date}),",
                f"        verl/trainer/config/{origin}",
                "Regenerate: python scripts/generate_verl_defaults.py",
            ]
            files[OUT_DIR / src.version / f"{name}.yaml"] = _render(cfg, header)
            if repo is not None:
                classes = _dataclass_fields(repo, src.commit)
                extra = _extra_fields(cfg, classes)
                text = _render(OmegaConf.create(extra), [
                    f"verl {src.version} '{name}': dataclass fields the YAML does not list, per config node",
                    f"(read with ast from volcengine/verl @ {src.commit}; generated, do not edit).",
                ])
                files[OUT_DIR / src.version / f"{name}.dataclass_fields.yaml"] = text
        index.append(f"  - {{version: '{src.version}', tag: {src.tag}, commit: {src.commit}, date: '{src.date}'}}")
    overlay = _strip_hydra(OmegaConf.load(ref / DAPO_OVERLAY[0]))
    files[OUT_DIR / "recipes" / "dapo_trainer.yaml"] = _render(overlay, [
        "DAPO recipe overlay, composed on top of ppo_trainer (generated, do not edit).",
        f"Source: volcengine/verl v0.7.0 @ {DAPO_OVERLAY[1]}, recipe/dapo/config/dapo_trainer.yaml",
    ])
    files[OUT_DIR / "versions.yaml"] = (
        "# Supported verl versions, oldest first (generated by scripts/generate_verl_defaults.py).\n"
        + "\n".join(index) + "\n"
    )
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, default=REPO.parent / "shared" / "verl-reference")
    parser.add_argument("--verl-repo", type=Path, default=None,
                        help="a git clone of volcengine/verl, to extract dataclass fields")
    parser.add_argument("--check", action="store_true", help="compare with committed files, write nothing")
    args = parser.parse_args()
    files = generate(args.reference, args.verl_repo)
    if args.check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"stale: {p.relative_to(REPO)}")
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
