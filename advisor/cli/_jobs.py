"""Each command's ``--format json`` document, as a function: what the CLI prints and the MCP server returns.

One function per command builds the document from plain arguments (paths as strings, overrides as a
list), so ``advisor check -f json`` and the MCP tool ``check`` give the same JSON by construction.
Each returns ``(document, exit_code)`` with the CLI's exit code, and raises AdvisorError for input
that cannot be read (the CLI's exit 2). The documents follow advisor/schemas/<command>.output.json.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError


def jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """The document exactly as --format json prints it (NaN and inf as null, numpy scalars as numbers)."""
    return json.loads(json.dumps(_sanitize(data), default=_json_default, allow_nan=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _sanitize(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    return value


def edit_document(edit: Any) -> dict[str, Any]:
    """The ``edit`` member: the changes as a diff of the user's file, and those that stay overrides."""
    if edit is None or not edit.changed:
        return {}
    return {"edit": {"path": edit.path, "diff": edit.diff(), "overrides": [c.override() for c in edit.overrides]}}


def check_job(config: str, overrides: Sequence[str] = (), *, verl_version: str | None = None, gpu: str | None = None,
              gpu_memory_gib: float | None = None, host_memory_gib: float | None = None,
              model_config: str | None = None, largest: bool = False, sequence_tokens: float | None = None,
              image_tokens: int | None = None) -> tuple[dict[str, Any], int]:
    from advisor.checks import check
    from advisor.diff import edit_for
    from advisor.load import load_config

    cfg = load_config(config, list(overrides), verl_version=verl_version)
    report = check(cfg, model_config=model_config, gpu=gpu, gpu_memory_gib=gpu_memory_gib,
                   host_memory_gib=host_memory_gib, largest=largest, sequence_tokens=sequence_tokens,
                   image_tokens=image_tokens)
    return jsonable({**report.to_dict(), **edit_document(edit_for(cfg, report.changes))}), report.exit_code


def rules_without(skip_trees: Sequence[str]) -> Any:
    if not skip_trees:
        return None
    from advisor.playbook import playbook_without

    return playbook_without(tuple(skip_trees))


def suggest_job(config: str, metrics: str, overrides: Sequence[str] = (), *, verl_version: str | None = None,
                window: int | None = None, gpu: str | None = None, gpu_memory_gib: float | None = None,
                skip_trees: Sequence[str] = (), samples: str | None = None) -> tuple[dict[str, Any], int]:
    from advisor.diff import edit_for
    from advisor.load import load_config
    from advisor.playbook import suggest_run

    cfg = load_config(config, list(overrides), verl_version=verl_version)
    if gpu and gpu_memory_gib is None:
        from advisor.memory import resolve_gpu

        gpu_memory_gib = resolve_gpu(gpu).memory_gib
    result = suggest_run(cfg, metrics, window=window, gpu_memory_gib=gpu_memory_gib, rules=rules_without(skip_trees))
    document = {**result.to_dict(), **edit_document(edit_for(cfg, result.changes))}
    if samples is not None:
        from advisor.metrics import load_samples

        limit = cfg.get("data.max_response_length")
        document["samples"] = load_samples(Path(samples),
                                           max_response_length=limit if isinstance(limit, int) else None).to_dict()
    return jsonable(document), 0


def explain_job(metric: str) -> tuple[dict[str, Any], int]:
    from advisor.playbook import explain_metric

    return jsonable(explain_metric(metric).to_dict()), 0


def report_job(config: str, metrics: str, overrides: Sequence[str] = (), *, out: str = "report.html",
               png_dir: str | None = None, verl_version: str | None = None, window: int | None = None,
               gpu: str | None = None, gpu_memory_gib: float | None = None,
               model_config: str | None = None) -> tuple[dict[str, Any], int]:
    from advisor.load import load_config
    from advisor.report import INSTALL_HINT, build_report, missing_plotting, write_html, write_pngs

    lacking = missing_plotting(png=png_dir is not None)
    if lacking:
        raise AdvisorError(f"advisor report needs {lacking}, which is not installed", suggestion=INSTALL_HINT)
    out_path, pngs_at = Path(out), Path(png_dir) if png_dir is not None else None
    inputs = [Path(config), Path(metrics), *([Path(model_config)] if model_config else [])]
    report_targets(out_path, pngs_at, inputs)
    cfg = load_config(config, list(overrides), verl_version=verl_version)
    if cfg.path:
        report_targets(out_path, pngs_at, [Path(cfg.path)])
    built = build_report(cfg, metrics, window=window, gpu=gpu, gpu_memory_gib=gpu_memory_gib,
                         model_config=model_config)
    try:
        write_html(built, out_path)
        pngs = write_pngs(built, pngs_at) if pngs_at is not None else []
    except OSError as err:
        raise AdvisorError(f"cannot write ({err.strerror or err})", path=str(err.filename or out_path)) from err
    return jsonable({"schema": 1, "out": str(out_path), "panels": [p.id for p in built.shown_panels],
                     "charts": len(built.charts), "diagnoses": [c.id for c in built.cards],
                     "pngs": [str(p) for p in pngs]}), 0


def report_targets(out: Path, png: Path | None, inputs: list[Path]) -> None:
    """Refuse to write over an input file, or into a --png 'directory' that is a file."""
    taken = {p.resolve() for p in inputs if p.exists() and not p.is_dir()}
    if out.resolve() in taken:
        raise AdvisorError("is an input of this report; refusing to overwrite it", path=str(out),
                           suggestion="choose another --out")
    if out.is_dir():
        raise AdvisorError("is a directory", path=str(out), suggestion="pass --out FILE.html")
    if not out.resolve().parent.is_dir():
        raise AdvisorError("its directory does not exist", path=str(out))
    if png is not None:
        if png.exists() and not png.is_dir():
            raise AdvisorError("is a file, not a directory", path=str(png), suggestion="pass --png DIR")
        from advisor.report.panels import PANELS

        for spec in PANELS:
            if (png / f"{spec.id}.png").resolve() in taken:
                raise AdvisorError(f"would overwrite the input {png / f'{spec.id}.png'}", path=str(png))


def verify_job(config: str, metrics: str, overrides: Sequence[str] = (), *, steps: int | None = None,
               seeds: int = 3, window: int | None = None, skip_trees: Sequence[str] = (), command: str | None = None,
               parallel: int = 1, out: str | None = None, storage: str | None = None, study_name: str | None = None,
               prune: bool = True, race: bool = True, every_seed: bool = False, dry_run: bool = False,
               verl_version: str | None = None, launcher: Any = None, propose: Sequence[str] = ()
               ) -> tuple[dict[str, Any], int]:
    """verify's plan (dry_run) or its finished sweep; trials run with ``launcher`` (default: local processes).
    ``every_seed`` is accepted for the tool's schema; verify runs every value on every seed anyway."""
    from advisor.load import load_config
    from advisor.playbook import suggest_run
    from sweeps import RunSettings
    from sweeps.verify import VerifySettings, plan_verify
    from sweeps.verify import verify as run_verify

    cfg = load_config(config, list(overrides), verl_version=verl_version)
    run = RunSettings(command=command, overrides=tuple(overrides), launcher=launcher, storage=storage,
                      study_name=study_name, parallel=parallel, out=out, verl_version=verl_version)
    settings = VerifySettings(steps=steps, seeds=seeds, window=window, rules=rules_without(skip_trees),
                              propose=tuple(propose), prune=prune, race=race, run=run)
    if dry_run:
        plan = plan_verify(suggest_run(cfg, metrics, window=window, rules=settings.rules), settings)
        return jsonable(plan.to_dict()), 0
    result = run_verify(cfg, metrics, settings)
    return jsonable(result.to_dict()), result.exit_code
