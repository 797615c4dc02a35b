"""Regenerate knowledge/verl_defaults/recipes/ from verl's recipes: their own Hydra configs and entry points.

Usage:
    python scripts/generate_recipe_configs.py [--recipe-repo DIR] [--verl-repo DIR] [--check]

Sources (bare git mirrors, read with ``git show``; no recipe code is copied):
- verl-project/verl-recipe at HEAD: one folder per recipe at the top level (``sppo/``, ``dapo/``, nested
  ones such as ``dapo/dapo_transfer_queue/`` or ``gkd/megatron/``); verl mounts it as ``recipe/``, so its
  entry points run as ``python -m recipe.<path>.<module>``.
- verl-project/verl's ``recipe/`` folder at the tags of the releases that still held it (v0.3.0.post1 ...
  v0.7.0; from v0.7.1 on ``recipe/`` is a git submodule pointing at verl-recipe).

For each source this writes
- ``<source>/<recipe>/<config>.yaml``: a recipe config's own keys and values (what Hydra merges at
  ``_self_``), with the ``defaults`` list and ``hydra:`` settings dropped and ``${...}`` kept. A config whose
  ``defaults`` list is ``[ppo_trainer|ppo_megatron_trainer, _self_]`` is composed at load time on that verl
  base of the version being checked (what ``hydra.searchpath: file://verl/trainer/config`` or
  ``pkg://verl.trainer.config`` finds when verl runs it). A config with no ``defaults`` list is the whole
  config. A config whose ``defaults`` name configs of its own folder (``rep_exp`` keeps a copy of verl's
  config tree) is composed here with Hydra's own ``compose`` and written whole.
- ``index.yaml``: per source, its commit; per recipe config, its base and file; per entry point (every module
  with ``@hydra.main``, read with ``ast``), its config, what it runs (``rl``, ``evaluation``, ``generation``,
  ``sft``) and the trainer facts the checks need, each with the file:line it was read from:
  ``critic: false`` when the recipe's trainer is built with ``use_critic=False`` or sets
  ``self.use_critic = False`` (sppo, prime, spin, gkd), whatever ``critic.enable`` or the estimator say;
  ``validate_config: false`` when its own TaskRunner never runs verl's ``validate_config`` (atropos, gkd), so the
  rules only that function enforces do not apply; ``old_log_prob: false`` when, besides, its trainer has its own
  ``fit`` that never recomputes old log-probs (gkd); ``rollout_worker: own`` when it defines its own rollout
  worker on verl's bare ``Worker`` (dance_grpo), so verl's rollout config rules do not apply; ``v1_trainer:
  false`` when its folder never reads ``trainer.use_v1`` (verl switches to its V1 trainer only in
  verl/trainer/main_ppo.py's main()); ``verl_pin``: the verl commit its ``REQUIRED_VERL.txt`` tests it with.

``--check`` regenerates into memory and exits 1 if any committed file differs.
"""

from __future__ import annotations

import argparse
import ast
import posixpath
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _generated import write_or_check  # noqa: E402

OUT_DIR = REPO / "knowledge" / "verl_defaults" / "recipes"
MIRRORS = Path("/work/.mirror")
BASES = ("ppo_trainer", "ppo_megatron_trainer")
VERL_TAGS = ("v0.3.0.post1", "v0.4.1", "v0.5.0", "v0.6.1", "v0.7.0")  # releases whose tree holds recipe/


@dataclass(frozen=True)
class Source:
    name: str  # "verl-recipe", "verl-0.7.0"
    repo_dir: Path
    repo: str  # "verl-project/verl-recipe"
    rev: str  # "HEAD" or a tag
    root: str  # folder in the repo holding the recipes ("" or "recipe/")
    verl: str  # the verl version it belongs to: a release, or "latest" (verl >= 0.7.1, whose recipe/ is verl-recipe)
    prefix: str = "recipe."  # module prefix its entry points run under

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo_dir), *args], capture_output=True, text=True,
                              check=True).stdout

    def commit(self) -> str:
        return self.git("rev-parse", f"{self.rev}^{{commit}}").strip()

    def date(self) -> str:
        return self.git("log", "-1", "--format=%cs", self.rev).strip()

    def files(self) -> list[str]:
        """Paths relative to the recipes root."""
        listing = self.git("ls-tree", "-r", "--name-only", self.rev, *([self.root] if self.root else []))
        return [p[len(self.root):] for p in listing.split()]

    def read(self, path: str) -> str:
        return self.git("show", f"{self.rev}:{self.root}{path}")


def sources(recipe_repo: Path, verl_repo: Path) -> list[Source]:
    out = [Source("verl-recipe", recipe_repo, "verl-project/verl-recipe", "HEAD", "", "latest"),
           # recipes verl moved into its own tree (one_step_off_policy, fully_async_policy)
           Source("verl-main", verl_repo, "verl-project/verl", "HEAD", "verl/experimental/", "latest",
                  "verl.experimental.")]
    for tag in VERL_TAGS:
        out.append(Source(f"verl-{tag[1:]}", verl_repo, "verl-project/verl", tag, "recipe/", tag[1:]))
    return out


# ---------------------------------------------------------------------------------------------
# Entry points: modules with @hydra.main(config_path=..., config_name=...)


@dataclass
class EntryPoint:
    module: str
    path: str  # relative to the recipes root
    line: int
    config_dir: str | None  # relative to the recipes root; None when it points into verl itself
    config_name: str


def _hydra_main(tree: ast.AST) -> tuple[int, dict[str, str]] | None:
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "main" \
                    and isinstance(deco.func.value, ast.Name) and deco.func.value.id == "hydra":
                kwargs = {k.arg: k.value.value for k in deco.keywords
                          if k.arg and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
                return deco.lineno, kwargs
    return None


def entry_points(src: Source, files: list[str], prefix: str | None = None) -> list[EntryPoint]:
    out = []
    for path in files:
        if not path.endswith(".py"):
            continue
        text = src.read(path)
        if "hydra.main" not in text:
            continue
        found = _hydra_main(ast.parse(text))
        if found is None:
            continue
        line, kwargs = found
        folder = posixpath.dirname(path)
        config_dir: str | None = posixpath.normpath(posixpath.join(folder, kwargs.get("config_path", ".")))
        if config_dir.startswith("..") or "verl/trainer/config" in (kwargs.get("config_path") or ""):
            config_dir = None  # verl's own trainer config (recipe/partial_rollout: ../../verl/trainer/config)
        module = (src.prefix if prefix is None else prefix) + path[:-3].replace("/", ".")
        out.append(EntryPoint(module, path, line, config_dir, kwargs.get("config_name", "")))
    return out


def _critic_off(src: Source, files: list[str], folder: str) -> list[str]:
    """file:line of what fixes the recipe's trainer to run without a critic, in the entry point's folder: a
    trainer class whose method sets ``self.use_critic = False`` unconditionally (not under an ``if``), or a
    trainer built with ``use_critic=False``. A rollouter's or a validator's ``use_critic=False`` is not one."""
    hits = []
    for path in sorted(p for p in files if posixpath.dirname(p) == folder and p.endswith(".py")):
        for node in ast.walk(ast.parse(src.read(path))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Trainer"):
                for method in (n for n in node.body if isinstance(n, ast.FunctionDef)):
                    for stmt in method.body:  # top level of the method only
                        if isinstance(stmt, ast.Assign) and _is_false(stmt.value) and any(
                                isinstance(t, ast.Attribute) and t.attr == "use_critic" for t in stmt.targets):
                            hits.append(f"{src.root}{path}:{stmt.lineno}")
            elif isinstance(node, ast.Call) and _callee(node).endswith("Trainer"):
                hits += [f"{src.root}{path}:{k.value.lineno}" for k in node.keywords
                         if k.arg == "use_critic" and _is_false(k.value)]
    return sorted(set(hits), key=hits.index)


_OLD_LOG_PROB_CALLS = {"compute_log_prob", "compute_old_log_prob", "_compute_old_log_prob"}


def _calls(src: Source, files: list[str], folder: str) -> set[str]:
    """Names of the functions and methods called by the Python files of the entry point's folder."""
    return {_callee(node) for path in files if posixpath.dirname(path) == folder and path.endswith(".py")
            for node in ast.walk(ast.parse(src.read(path))) if isinstance(node, ast.Call)}


def _no_validate_config(src: Source, files: list[str], folder: str, entry_path: str) -> list[str]:
    """file:line of the entry point's own TaskRunner when its folder never runs verl's ``validate_config`` (neither
    itself nor through ``verl.trainer.main_ppo.run_ppo``); else []."""
    if _calls(src, files, folder) & {"validate_config", "run_ppo"}:
        return []
    tree = ast.parse(src.read(entry_path))
    runners = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith("TaskRunner")]
    return [f"{src.root}{entry_path}:{line}" for line in runners]


def _own_rollout_worker(src: Source, files: list[str], folder: str) -> list[str]:
    """file:line of each rollout worker the entry point's folder defines on verl's bare ``Worker`` (dance_grpo's
    diffusion worker) instead of verl's ActorRolloutRefWorker, when the folder never builds verl's rollout
    (no ``RolloutConfig``, ``get_rollout_class`` or ``_build_rollout``: gvpo's worker is a copy of verl's)."""
    py = [p for p in files if posixpath.dirname(p) == folder and p.endswith(".py")]
    if any(word in src.read(p) for p in py for word in ("RolloutConfig", "get_rollout_class", "_build_rollout")):
        return []
    return [f"{src.root}{path}:{node.lineno}" for path in sorted(files)
            if posixpath.dirname(path) == folder and path.endswith(".py")
            for node in ast.walk(ast.parse(src.read(path)))
            if isinstance(node, ast.ClassDef) and "Rollout" in node.name
            and any(isinstance(b, ast.Name) and b.id == "Worker" for b in node.bases)]


def _no_old_log_prob(src: Source, files: list[str], folder: str) -> list[str]:
    """file:line of the trainer's own ``fit`` when the entry point's folder never recomputes old log-probs
    (no ``compute_log_prob``/``compute_old_log_prob`` call); else []."""
    if _calls(src, files, folder) & _OLD_LOG_PROB_CALLS:
        return []
    return [f"{src.root}{path}:{n.lineno}" for path in sorted(files)
            if posixpath.dirname(path) == folder and path.endswith(".py")
            for node in ast.walk(ast.parse(src.read(path))) if isinstance(node, ast.ClassDef)
            and node.name.endswith("Trainer") for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "fit"]


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


# REQUIRED_VERL.txt (verl-recipe): MODE -> the key holding the verl commit the recipe at HEAD is tested with.
# "reproduction_commit" (dapo) and "rolling_with_baseline" (spin) name an old commit and a rolling one for the
# mainline recipe; "mixed" offers two tracks (flowrl: verl 0.4.0 or rolling main), so it pins nothing.
_PIN_KEYS = {"pinned_tag": "COMMIT", "pinned_commit": "COMMIT", "rolling": "VERL_COMMIT",
             "reproduction_commit": "ROLLING_VERL_COMMIT", "rolling_with_baseline": "ROLLING_VERL_COMMIT"}


def _verl_pin(src: Source, files: list[str], folder: str, verl_repo: Path) -> dict[str, Any] | None:
    """The verl a recipe is tested with, from the nearest REQUIRED_VERL.txt at or above its folder."""
    parts = folder.split("/") if folder else []
    for k in range(len(parts), 0, -1):
        path = "/".join([*parts[:k], "REQUIRED_VERL.txt"])
        if path not in files:
            continue
        lines = src.read(path).splitlines()
        fields = {}
        for n, line in enumerate(lines, 1):
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                fields[key.strip()] = (value.strip(), n)
        mode = fields.get("MODE", ("", 0))[0]
        if mode not in _PIN_KEYS or _PIN_KEYS[mode] not in fields:
            return None
        commit, line = fields[_PIN_KEYS[mode]]

        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(verl_repo), *args], capture_output=True, text=True,
                                  check=True).stdout.strip()

        pin = {"commit": commit, "date": git("log", "-1", "--format=%cs", commit),
               "version": git("show", f"{commit}:verl/version/version"), "mode": mode,
               "source": f"{src.root}{path}:{line}"}
        if mode == "pinned_tag" and "TAG" in fields:
            pin["tag"] = fields["TAG"][0]  # a release: read as exactly that version when the advisor has it
        return pin
    return None


_KINDS = {"eval": "evaluation", "generation": "generation", "sft": "sft"}


def _kind(module: str, config_name: str) -> str:
    """What an entry point runs, from its module's or its config's name (verl.trainer.main_generation_server
    composes ppo_trainer but only generates)."""
    for word, kind in _KINDS.items():
        if word in module.rsplit(".", 1)[-1] or config_name.startswith(word):
            return kind
    return "rl"


# verl's own entry points (verl/trainer/*.py), over every release the advisor supports and main
VERL_REVS = ("v0.2.0.post2", "v0.3.0.post1", *VERL_TAGS, "v0.7.1", "v0.8.0", "v0.9.0", "HEAD")


def verl_entry_points(verl_repo: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rev in VERL_REVS:
        src = Source(rev, verl_repo, "verl-project/verl", rev, "verl/trainer/", rev, "verl.trainer.")
        for e in entry_points(src, [p for p in src.files() if "/" not in p]):
            out[e.module] = {"kind": _kind(e.module, e.config_name), "config": e.config_name,
                             "hydra_main": f"verl/trainer/{e.path}:{e.line} ({rev})"}  # the newest rev wins
        # `python -m verl.model_merger merge ...`: argparse, not Hydra; turns a checkpoint into a HF model
        merger = "verl/model_merger/__main__.py"
        listing = subprocess.run(["git", "-C", str(verl_repo), "ls-tree", "--name-only", rev, merger],
                                 capture_output=True, text=True, check=True).stdout.split()
        if listing:
            text = subprocess.run(["git", "-C", str(verl_repo), "show", f"{rev}:{merger}"], capture_output=True,
                                  text=True, check=True).stdout
            line = next((n for n, t in enumerate(text.splitlines(), 1) if t.startswith("def main")), 1)
            out["verl.model_merger"] = {"kind": "checkpoint-merge", "config": None,
                                        "hydra_main": f"{merger}:{line} ({rev})"}
    return out


# ---------------------------------------------------------------------------------------------
# Configs


def _load_yaml(text: str) -> Any:
    from omegaconf._utils import get_yaml_loader  # Hydra's YAML dialect

    return yaml.load(text, Loader=get_yaml_loader())


def _base_of(defaults: Any, own: set[str], where: str) -> str | bool | None:
    """The verl base a ``defaults`` list composes on; None for no list; True when it names the folder's own
    configs (compose with Hydra)."""
    if not defaults:
        return None
    names = [d for d in defaults if d != "_self_"]
    if defaults[-1] != "_self_" or len(names) != len(defaults) - 1:
        raise SystemExit(f"{where}: defaults list {defaults} is not '[..., _self_]'")
    if any(not isinstance(n, str) or n in own for n in names):
        return True
    if len(names) != 1 or names[0] not in BASES:
        raise SystemExit(f"{where}: defaults list {defaults} names no verl base config")
    return names[0]


def _compose_locally(src: Source, files: list[str], config_dir: str, name: str) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir

    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            if path.startswith(config_dir + "/") and path.endswith(".yaml"):
                target = Path(tmp) / path[len(config_dir) + 1:]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(src.read(path))
        with initialize_config_dir(config_dir=tmp, version_base=None):
            cfg = compose(config_name=name)
    container = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    return container


def _render(tree: dict[str, Any], header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    body = OmegaConf.to_yaml(OmegaConf.create(tree), sort_keys=False) if tree else "{}\n"
    return "\n".join(lines) + "\n" + body


def generate(recipe_repo: Path, verl_repo: Path) -> dict[Path, str]:
    files_out: dict[Path, str] = {}
    index: dict[str, Any] = {"sources": {}, "configs": {}, "entry_points": {}, "verl_entry_points": {}}
    for src in sources(recipe_repo, verl_repo):
        files = src.files()
        commit = src.commit()
        index["sources"][src.name] = {"repo": src.repo, "rev": src.rev, "commit": commit, "date": src.date(),
                                      "root": src.root or ".", "verl": src.verl}
        entries = entry_points(src, files)
        used = {(e.config_dir, e.config_name) for e in entries if e.config_dir is not None}
        for path in sorted(files):
            folder, filename = posixpath.split(path)
            if posixpath.basename(folder) != "config" or not filename.endswith(".yaml") \
                    or filename.startswith("_generated"):
                continue
            data = _load_yaml(src.read(path))
            if not isinstance(data, dict):
                continue  # agent-loop lists and the like: not a Hydra trainer config
            name = filename[:-5]
            own = {posixpath.basename(p)[:-5] for p in files if posixpath.dirname(p) == folder}
            own |= {posixpath.relpath(posixpath.dirname(p), folder) for p in files
                    if posixpath.dirname(posixpath.dirname(p)) == folder}  # config groups (folders)
            base = _base_of(data.get("defaults"), own - {name}, f"{src.name}:{path}")
            if base is None and (folder, name) not in used:
                continue  # a side file (ray runtime_env, interaction config), not what an entry point composes
            recipe = posixpath.dirname(folder)
            if base is True:
                tree, base = _compose_locally(src, files, folder, name), None
                how = "composed with Hydra from its own folder"
            else:
                tree = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
                how = f"composed on verl's {base}" if base else "a whole config (no defaults list)"
            config_id = f"{recipe}/{name}"
            rel = f"{src.name}/{recipe}/{name}.yaml"
            files_out[OUT_DIR / rel] = _render(tree, [
                f"recipe config '{config_id}' ({how}; keys and values only; generated, do not edit).",
                f"Source: {src.repo} {src.rev} @ {commit}, {src.root}{path}",
                "Regenerate: python scripts/generate_recipe_configs.py",
            ])
            index["configs"].setdefault(config_id, {})[src.name] = {"base": base, "file": rel,
                                                                    "source": f"{src.root}{path}"}
        for e in entries:
            recipe = posixpath.dirname(e.config_dir) if e.config_dir else None
            config: str | None = f"{recipe}/{e.config_name}" if recipe else e.config_name
            if recipe and config not in index["configs"]:
                config = None  # not in its folder: Hydra fails unless the script passes --config-name
            entry: dict[str, Any] = {"config": config, "recipe": recipe, "kind": _kind(e.module, e.config_name),
                                     "hydra_main": f"{src.root}{e.path}:{e.line}"}
            if config is None:
                entry["missing_config"] = e.config_name
            if src.name == "verl-recipe" and (pin := _verl_pin(src, files, posixpath.dirname(e.path), verl_repo)):
                entry["verl_pin"] = pin
            if runner := _no_validate_config(src, files, posixpath.dirname(e.path), e.path):
                entry["validate_config"] = False
                entry["validate_config_source"] = runner
                if fits := _no_old_log_prob(src, files, posixpath.dirname(e.path)):
                    entry["old_log_prob"] = False
                    entry["old_log_prob_source"] = fits
            if not any(word in src.read(p) for p in files if posixpath.dirname(p) == posixpath.dirname(e.path)
                       and p.endswith(".py") for word in ("use_v1", "TaskRunnerV1")):
                # verl picks its V1 trainer in verl/trainer/main_ppo.py main() only (0.9.1 main_ppo.py:183-192);
                # an entry point of its own that never reads trainer.use_v1 runs the trainer it builds itself
                entry["v1_trainer"] = False
            if own := _own_rollout_worker(src, files, posixpath.dirname(e.path)):
                entry["rollout_worker"] = "own"
                entry["rollout_worker_source"] = own
            if critic := _critic_off(src, files, posixpath.dirname(e.path)):
                entry["critic"] = False
                entry["critic_source"] = critic
            index["entry_points"].setdefault(e.module, {})[src.name] = entry
    index["verl_entry_points"] = verl_entry_points(verl_repo)
    header = ("# verl recipes: entry points, their configs and trainer facts "
              "(generated by scripts/generate_recipe_configs.py, do not edit).\n")
    files_out[OUT_DIR / "index.yaml"] = header + yaml.safe_dump(index, sort_keys=True, width=120)
    return files_out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe-repo", type=Path, default=MIRRORS / "verl-project+verl-recipe" / "repo")
    parser.add_argument("--verl-repo", type=Path, default=MIRRORS / "verl-project+verl" / "repo")
    parser.add_argument("--check", action="store_true", help="compare with committed files, write nothing")
    args = parser.parse_args()
    files = generate(args.recipe_repo, args.verl_repo)
    return write_or_check(files, REPO, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
