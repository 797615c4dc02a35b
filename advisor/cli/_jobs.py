"""Each command's work, as a function returning a typed result that the CLI and the MCP server only render.

One function per command runs it from plain arguments (paths as strings or paths, overrides as a list) and
returns a result object: its ``document()`` is the ``--format json`` document (what the MCP tool of the same
name returns, advisor/schemas/<command>.output.json), its ``exit_code`` the CLI's, and its other members what
the text, diff, yaml and overrides renderings read. So ``advisor check -f json``, ``advisor check`` and the MCP
tool ``check`` show one computation. A function raises AdvisorError for input that cannot be read (exit 2).
:data:`JOBS` is the registry the MCP server dispatches on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from advisor.errors import AdvisorError, ConfigError, ExitCode

if TYPE_CHECKING:  # the results' types; each job imports what it runs when it runs
    from advisor.checks import CheckReport
    from advisor.diff import FileEdit
    from advisor.findings import Change
    from advisor.load import VerlConfig
    from advisor.metrics import SampleReport
    from advisor.playbook import Explanation, Rule, Suggestion
    from advisor.report import Report
    from sweeps import Launcher, Progress
    from sweeps.verify import VerifyPlan, VerifyResult

PathArg = str | Path  # a path as the MCP tool (a string) or the CLI (a Path) gives it


def jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """The document exactly as --format json prints it (NaN and inf as null, numpy scalars as numbers)."""
    import json  # the JSON output only: not on the text path

    out: dict[str, Any] = json.loads(json.dumps(_sanitize(data), default=_json_default, allow_nan=False))
    return out


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


def _str(path: PathArg | None) -> str | None:
    return str(path) if path else None


def edit_document(edit: FileEdit | None) -> dict[str, Any]:
    """The ``edit`` member: the changes as a diff of the user's file, and those that stay overrides."""
    refused = [{"change": c.to_dict(), "why": why} for c, why in getattr(edit, "refused", ())]
    if edit is None or (not edit.changed and not refused):
        return {}
    document: dict[str, Any] = {"path": edit.path, "diff": edit.diff(),
                                "overrides": [c.override() for c in edit.overrides]}
    if refused:
        document["refused"] = refused
    return {"edit": document}


class JobResult(Protocol):
    """What every job returns: its JSON document and the CLI's exit code."""

    @property
    def exit_code(self) -> ExitCode: ...

    def document(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ChangeResult:
    """A job that proposes config changes (check, suggest): the config, the changes and their edit of its file."""

    cfg: VerlConfig
    changes: list[Change]
    edit: FileEdit | None  # None when the config is not a file the user edits


@dataclass(frozen=True)
class CheckResult(ChangeResult):
    """What ``check_job`` returns: the check's report beside the changes and their edit."""

    report: CheckReport = field(kw_only=True)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode(self.report.exit_code)

    def document(self) -> dict[str, Any]:
        return jsonable({**self.report.to_dict(), **edit_document(self.edit)})


@dataclass(frozen=True)
class SuggestResult(ChangeResult):
    """What ``suggest_job`` returns: the suggestion and, with --samples, the samples' report."""

    suggestion: Suggestion = field(kw_only=True)
    samples: SampleReport | None = field(default=None, kw_only=True)  # the report of --samples
    metrics: str = field(default="", kw_only=True)  # the metrics path, as the text names it

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK  # a diagnosis is an answer, not a failure

    def document(self) -> dict[str, Any]:
        return jsonable({**self.suggestion.to_dict(), **edit_document(self.edit),
                         **({"samples": self.samples.to_dict()} if self.samples is not None else {})})


@dataclass(frozen=True)
class ExplainResult:
    """What ``explain_job`` returns: one metric's explanation."""

    explanation: Explanation

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def document(self) -> dict[str, Any]:
        return jsonable(self.explanation.to_dict())


@dataclass(frozen=True)
class ReportResult:
    """What ``report_job`` returns: the page written, what it drew, and the PNGs."""

    out: Path
    built: Report
    pngs: list[Path] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def document(self) -> dict[str, Any]:
        return jsonable({"schema": 1, "out": str(self.out), "panels": [p.id for p in self.built.shown_panels],
                         "charts": len(self.built.charts), "diagnoses": [c.id for c in self.built.cards],
                         "pngs": [str(p) for p in self.pngs]})

    def lines(self) -> list[str]:
        """The text rendering: what was written."""
        ids = ", ".join(c.id for c in self.built.cards) or "none"
        return [f"wrote {self.out} ({len(self.built.shown_panels)} panels, {len(self.built.charts)} charts; "
                f"diagnoses: {ids})", *(f"wrote {path}" for path in self.pngs)]


@dataclass(frozen=True)
class VerifyOutcome:
    """What ``verify_job`` returns: the plan, and its result unless it was a dry run."""

    plan: VerifyPlan
    result: VerifyResult | None = None  # None: a dry run

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.result is None else ExitCode(self.result.exit_code)

    def document(self) -> dict[str, Any]:
        return jsonable((self.plan if self.result is None else self.result).to_dict())


def _gpu_memory(gpu: str | None, gpu_memory_gib: float | None) -> float | None:
    """--gpu-memory-gib, else the memory of --gpu (None: neither)."""
    if gpu and gpu_memory_gib is None:
        from advisor.memory import resolve_gpu

        return float(resolve_gpu(gpu).memory_gib)
    return gpu_memory_gib


def rules_without(skip_trees: Sequence[str]) -> tuple[Rule, ...] | None:
    if not skip_trees:
        return None
    from advisor.playbook import playbook_without

    return playbook_without(tuple(skip_trees))


def check_job(config: PathArg, overrides: Sequence[str] = (), *, verl_version: str | None = None,
              gpu: str | None = None, gpu_memory_gib: float | None = None, host_memory_gib: float | None = None,
              model_config: PathArg | None = None, largest: bool = False, sequence_tokens: float | None = None,
              image_tokens: int | None = None, set_vars: Sequence[str] = ()) -> CheckResult:
    from advisor.checks import check
    from advisor.diff import edit_for
    from advisor.load import load_config

    cfg = load_config(config, list(overrides), verl_version=verl_version, script_vars=script_variables(set_vars))
    report = check(cfg, model_config=_str(model_config), gpu=gpu, gpu_memory_gib=gpu_memory_gib,
                   host_memory_gib=host_memory_gib, largest=largest, sequence_tokens=sequence_tokens,
                   image_tokens=image_tokens)
    return CheckResult(cfg, report.changes, edit_for(cfg, report.changes), report=report)


def run_config(config: PathArg, log: PathArg, overrides: Sequence[str], verl_version: str | None
               ) -> tuple[VerlConfig, list[str]]:
    """The config of a run that ran, and notes on how it was read. Beside its console log, a config is read on the
    verl version the log's printed config dates the run to (not the newest release) unless --verl-version says
    otherwise; a launch script that runs no verl command itself (it calls another script) gives way to the config
    the log printed."""
    from advisor.load import is_console_log, load_config, load_config_from_log

    if Path(config) == Path(log) or not is_console_log(Path(log)):
        return load_config(config, list(overrides), verl_version=verl_version), []
    try:
        printed = load_config_from_log(log, list(overrides), verl_version=verl_version)
    except AdvisorError:
        printed = None
    version = verl_version or (printed.version if printed is not None else None)
    try:
        cfg = load_config(config, list(overrides), verl_version=version)
    except ConfigError as err:
        if printed is None or "no verl command found" not in err.message:
            raise
        return printed, [f"{config} runs no verl command itself (it calls another script): read "
                         f"{printed.from_log.description} of {log} instead"]
    notes = []
    if printed is not None and verl_version is None:
        notes.append(f"{config} read as verl {version}, the version that {printed.from_log.description} of {log} "
                     "fits (not the newest release)")
    return cfg, notes


def script_variables(assignments: Sequence[str]) -> dict[str, str]:
    """``--set-var NAME=VALUE`` options as the launch environment a script is read in."""
    import re

    out: dict[str, str] = {}
    for text in assignments:
        name, sep, value = text.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ConfigError(f"--set-var {text!r} is not NAME=VALUE (a shell variable name, '=', its value)")
        out[name] = value
    return out


def suggest_job(config: PathArg, metrics: PathArg, overrides: Sequence[str] = (), *, verl_version: str | None = None,
                window: int | None = None, gpu: str | None = None, gpu_memory_gib: float | None = None,
                skip_trees: Sequence[str] = (), samples: PathArg | None = None) -> SuggestResult:
    from advisor.diff import edit_for
    from advisor.playbook import suggest_run

    cfg, notes = run_config(config, metrics, overrides, verl_version)
    result = suggest_run(cfg, metrics, window=window, gpu_memory_gib=_gpu_memory(gpu, gpu_memory_gib),
                         rules=rules_without(skip_trees))
    result.notes[:0] = notes
    sample_report = None
    if samples is not None:
        from advisor.metrics import load_samples

        limit = cfg.get("data.max_response_length")
        sample_report = load_samples(Path(samples), max_response_length=limit if isinstance(limit, int) else None)
    return SuggestResult(cfg, result.changes, edit_for(cfg, result.changes), suggestion=result, samples=sample_report,
                         metrics=str(metrics))


def explain_job(metric: str) -> ExplainResult:
    from advisor.playbook import explain_metric

    return ExplainResult(explain_metric(metric))


def report_job(config: PathArg, metrics: PathArg, overrides: Sequence[str] = (), *, out: PathArg = "report.html",
               png_dir: PathArg | None = None, verl_version: str | None = None, window: int | None = None,
               gpu: str | None = None, gpu_memory_gib: float | None = None,
               model_config: PathArg | None = None) -> ReportResult:
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
                         model_config=_str(model_config))
    try:
        write_html(built, out_path)
        pngs = write_pngs(built, pngs_at) if pngs_at is not None else []
    except OSError as err:
        raise AdvisorError(f"cannot write ({err.strerror or err})", path=str(err.filename or out_path)) from err
    return ReportResult(out_path, built, pngs)


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


def _local_launcher(cfg: VerlConfig, address: str | None, gpus_per_trial: float | None) -> Launcher:
    from sweeps import LocalLauncher

    return LocalLauncher()


def _ray_launcher(cfg: VerlConfig, address: str | None, gpus_per_trial: float | None) -> Launcher:
    import os

    from sweeps import RayJobLauncher

    if gpus_per_trial is None:
        gpus_per_trial = float((cfg.get("trainer.n_gpus_per_node") or 0) * (cfg.get("trainer.nnodes") or 1))
    return RayJobLauncher(address or os.environ.get("RAY_ADDRESS") or "http://127.0.0.1:8265",
                          gpus_per_trial=gpus_per_trial)


# --launcher: where trials run (processes here, or jobs on a Ray cluster)
LAUNCHERS: dict[str, Callable[[VerlConfig, str | None, float | None], Launcher]] = {"local": _local_launcher,
                                                                                     "ray": _ray_launcher}


def launcher_for(cfg: VerlConfig, launcher: str | Launcher, address: str | None = None,
                 gpus_per_trial: float | None = None) -> Launcher:
    """The trials' launcher: a name of :data:`LAUNCHERS`, or a launcher object as it is."""
    if not isinstance(launcher, str):
        return launcher
    return LAUNCHERS[launcher](cfg, address, gpus_per_trial)


def verify_job(config: PathArg, metrics: PathArg, overrides: Sequence[str] = (), *, steps: int | None = None,
               seeds: int = 3, window: int | None = None, skip_trees: Sequence[str] = (), command: str | None = None,
               parallel: int = 1, out: PathArg | None = None, storage: str | None = None,
               study_name: str | None = None, prune: bool = True, race: bool = True, every_seed: bool = False,
               dry_run: bool = False, verl_version: str | None = None, launcher: str | Launcher = "local",
               address: str | None = None, gpus_per_trial: float | None = None, stall_timeout: int = 1800,
               gpu: str | None = None, propose: Sequence[str] = (), own_scale: bool = False,
               show_plan: Callable[[VerifyPlan], None] | None = None,
               progress_for: Callable[[VerifyPlan], Progress] | None = None) -> VerifyOutcome:
    """verify's plan (dry_run) or its finished sweep. ``launcher``: ``local``, ``ray`` or a launcher object;
    ``stall_timeout``: seconds (0: never). ``show_plan`` sees the plan before any trial starts, and
    ``progress_for(plan)`` gives the sweep's progress reporter (the CLI's; none for the MCP tool).
    ``every_seed`` is accepted for the tool's schema; verify runs every value on every seed anyway."""
    from advisor.load import load_config
    from advisor.playbook import suggest_run
    from sweeps import RunSettings
    from sweeps.verify import VerifySettings, plan_verify, run_plan

    cfg = load_config(config, list(overrides), verl_version=verl_version)
    run = RunSettings(command=command, overrides=tuple(overrides),
                      launcher=launcher_for(cfg, launcher, address, gpus_per_trial), storage=storage,
                      study_name=study_name, parallel=parallel, out=out, verl_version=verl_version,
                      stall_timeout_s=stall_timeout or None)
    settings = VerifySettings(steps=steps, seeds=seeds, window=window, rules=rules_without(skip_trees),
                              propose=tuple(propose), prune=prune, race=race, gpu_memory_gib=_gpu_memory(gpu, None),
                              own_scale=own_scale, run=run)
    plan = plan_verify(suggest_run(cfg, metrics, window=settings.window, rules=settings.rules), settings)
    if dry_run:
        return VerifyOutcome(plan)
    if show_plan is not None:
        show_plan(plan)
    progress = progress_for(plan) if progress_for is not None else None
    return VerifyOutcome(plan, run_plan(cfg, plan, settings.with_run(progress=progress)))


@dataclass(frozen=True)
class Job:
    """A job as the MCP server calls it: which tool arguments it takes by position, in order."""

    run: Callable[..., JobResult]
    positional: tuple[str, ...]
    overrides: bool = True  # takes the tool's ``overrides`` list after them

    def call(self, arguments: Mapping[str, Any]) -> JobResult:
        args = dict(arguments)
        if "config" in self.positional and "config" not in args and "metrics" in args:
            args["config"] = args["metrics"]  # a log alone: its printed config, as `advisor suggest LOG`
        positional = [args.pop(name) for name in self.positional]
        if self.overrides:
            positional.append(args.pop("overrides", []))
        return self.run(*positional, **args)


JOBS: dict[str, Job] = {
    "check": Job(check_job, ("config",)),
    "suggest": Job(suggest_job, ("config", "metrics")),
    "explain": Job(explain_job, ("metric",), overrides=False),
    "report": Job(report_job, ("config", "metrics")),
    "verify": Job(verify_job, ("config", "metrics")),
}
