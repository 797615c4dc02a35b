"""``advisor check``: validation findings, the batch layers and one combined, verified diff."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from advisor.codes import (
    MEMORY_NOT_ESTIMATED,
    MEMORY_OOM,
    MEMORY_TIGHT,
    UNDEFINED_VARIABLE,
    WRONG_TYPE,
    undefined_variable_message,
)
from advisor.errors import ConfigError, ExitCode
from advisor.facts import BatchPlan, batch_plan
from advisor.findings import Change, Finding, sort_findings
from advisor.load import VerlConfig, recording_reads, was_read

from ._run import changes_that_hold, run_checks

SCHEMA_VERSION = 1


@dataclass
class CheckReport:
    """What ``check`` found in one config: findings, batch layers, changes and, with a GPU, memory."""

    config: VerlConfig
    findings: list[Finding]
    batch: BatchPlan
    changes: list[Change] = field(default_factory=list)
    memory: Any | None = None  # advisor.memory.MemoryEstimate when a GPU was given
    limits: tuple[Any, ...] | None = None  # advisor.memory.Largest per phase, with --max
    version_note: Any | None = None  # ._version_note.VersionNote: why the version was detected

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def infos(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "info"]

    @property
    def overrides(self) -> list[str]:
        return [c.override() for c in self.changes]

    @property
    def exit_code(self) -> int:
        memory_oom = self.memory is not None and getattr(self.memory, "verdict", "ok") == "oom"
        return ExitCode.FOUND if self.errors or memory_oom else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        cfg = self.config
        out: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "verl_version": cfg.version,
            "config": {"path": cfg.path, "kind": cfg.kind, "config_name": cfg.config_name,
                       "version_detected": cfg.version_detected, "version_installed": cfg.version_installed,
                       "version_note": self.version_note.to_dict() if self.version_note else None},
            "errors": [f.to_dict() for f in self.errors],
            "warnings": [f.to_dict() for f in self.warnings],
            "infos": [f.to_dict() for f in self.infos],
            "batch": self.batch.to_dict(),
            "changes": [c.to_dict() for c in self.changes],
            "overrides": self.overrides,
        }
        if self.memory is not None:
            out["memory"] = self.memory.to_dict()
        if self.limits is not None:
            out["max"] = [limit.to_dict() for limit in self.limits]
        return out


def combine_fixes(cfg: VerlConfig, findings: list[Finding], *, model: Any | None = None) -> list[Change]:
    """Merge the findings' verified fixes into one diff (errors first) that holds together as a whole.

    A later fix that touches a key an earlier one already changed is skipped; each fix is added only if
    the diff so far plus it, re-checked as one, raises no finding the config did not have, or only
    ones answered by a dependent key (which joins the diff).
    """
    before = {(f.id, f.keys) for f in findings}
    chosen: list[Change] = []
    for finding in findings:
        if finding.severity == "info" or not finding.fix:
            continue
        touched = {c.key for c in chosen} | {c.renames for c in chosen if c.renames}
        if any(c.key in touched for c in finding.fix):
            continue
        held = changes_that_hold(cfg, chosen + list(finding.fix), before, model=model, cause=finding.fix[0].key)
        if held is not None:
            chosen = held
    return chosen


def model_facts(cfg: VerlConfig, model_config: str | None = None) -> Any | None:
    """Architecture facts for the checks (heads, KV heads, context), or None when the model is unknown."""
    from advisor.memory import resolve_model

    try:
        spec = resolve_model(cfg, model_config=model_config)
    except ConfigError:
        if model_config:
            raise  # the user named a config.json: an unreadable one is an input error
        return None
    return SimpleNamespace(name=spec.name, num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
                           max_position_embeddings=spec.max_position_embeddings, spec=spec)


def _missing_keys(missing: str) -> tuple[str, ...]:
    """The config keys a memory phase's missing input names (the data's lengths: data.train_files)."""
    import re

    keys = tuple(dict.fromkeys(re.findall(r"(?:actor_rollout_ref|critic|data|trainer)\.[\w.]+\w", missing)))
    return keys[:1] or ("data.train_files",)


def _memory_finding(cfg: VerlConfig, kwargs: dict[str, Any], facts: Any | None) -> tuple[Any, Finding | None]:
    from advisor.memory import estimate_memory, find_memory_fix

    try:
        estimate = estimate_memory(cfg, **kwargs)
    except ConfigError as err:
        if kwargs.get("model_config"):
            raise
        hint = f"; {err.suggestion}" if err.suggestion else ""
        return None, MEMORY_NOT_ESTIMATED.finding(f"GPU memory not estimated: {err.message}{hint}",
                                                  ("actor_rollout_ref.model.path",),
                             details={"suggestion": err.suggestion})
    if estimate.verdict == "ok":
        return estimate, None
    if estimate.verdict == "unknown":
        unknown = [s for s in estimate.stages if s.risk == "unknown"]
        return estimate, MEMORY_NOT_ESTIMATED.finding(
                                 "GPU memory of " + ", ".join(s.stage for s in unknown) + " not estimated: "
                                 + (unknown[0].missing or ""), _missing_keys(unknown[0].missing or ""),
                                 "advisor memory model (docs/memory.md)")

    def is_valid(candidate: VerlConfig) -> bool:
        return not any(f.severity == "error" for f in run_checks(candidate, model=facts, verify_fixes=False))

    fix = find_memory_fix(cfg, kwargs, is_valid)
    worst = estimate.peak
    severity = "error" if estimate.verdict == "oom" else "warning"
    verb = "runs out of memory" if estimate.verdict == "oom" else "is tight"
    message = (f"{worst.stage} {verb} on {estimate.gpu.name}: {worst.peak_gib:.1f} of {worst.capacity_gib:.1f} GiB"
               + (f" ({worst.reason})" if getattr(worst, "reason", "") else "") + f"; {fix.explanation}")
    code = MEMORY_OOM if severity == "error" else MEMORY_TIGHT
    keys = tuple(c.key for c in fix.changes) or ("trainer.n_gpus_per_node",)
    finding = code.finding(message, keys,
                      fix=tuple(fix.changes), details={"fix": fix.to_dict()})
    return estimate, finding


def check(cfg: VerlConfig, *, model_config: str | None = None, gpu: str | None = None,
          gpu_memory_gib: float | None = None, host_memory_gib: float | None = None,
          largest: bool = False, sequence_tokens: float | None = None,
          image_tokens: int | None = None) -> CheckReport:
    """Validate a config, explain its batch layers and, when a GPU is given, predict memory per phase.

    ``largest`` (``advisor check --max``): also the largest micro batch / token budget /
    gpu_memory_utilization that keeps each phase ``ok``.
    """
    with recording_reads() as reads:  # the keys the checks, the memory model and the fixes read
        facts = model_facts(cfg, model_config)
        findings = run_checks(cfg, model=facts)
        memory = limits = None
        if gpu or gpu_memory_gib:
            from advisor.memory import resolve_gpu

            resolve_gpu(gpu, memory_gib=gpu_memory_gib)  # a GPU the catalog lacks or that is ambiguous: exit 2
            kwargs = {"gpu": gpu, "gpu_memory_gib": gpu_memory_gib, "host_memory_gib": host_memory_gib,
                      "model_config": model_config, "sequence_tokens": sequence_tokens,
                      "image_tokens": image_tokens}
            memory, finding = _memory_finding(cfg, kwargs, facts)
            if finding is not None:
                findings = sort_findings([*findings, finding])
            if largest and memory is not None:
                from advisor.memory import largest_that_fits

                limits = largest_that_fits(cfg, kwargs)
        changes = combine_fixes(cfg, findings, model=facts)
        plan = batch_plan(cfg)
    from ._version_note import version_note

    return CheckReport(cfg, quiet_undefined_variables(findings, reads), plan, changes, memory, limits,
                       version_note(cfg))


def quiet_undefined_variables(findings: list[Finding], reads: set[str]) -> list[Finding]:
    """Keep a script's undefined-variable note (L009) only where it matters: when a key it feeds is one some
    check, the memory model or a fix read, and no wrong-type finding (L008) already names that key (a
    ``$HOME`` in ``data.train_files`` is noise; a ``$NNODES`` in ``trainer.nnodes`` is said once); the note
    names only those keys."""
    typed = {k for f in findings if f.id == WRONG_TYPE.id for k in f.keys}
    out = []
    for f in findings:
        if f.id == UNDEFINED_VARIABLE.id:
            keys = tuple(k for k in f.keys if k not in typed and was_read(k, reads))
            if not keys:
                continue
            if keys != f.keys:  # name only the keys that matter
                f = replace(f, keys=keys, message=undefined_variable_message(f.details["what"], keys))
        out.append(f)
    return out
