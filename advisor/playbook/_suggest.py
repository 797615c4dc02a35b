"""``advisor suggest``: from a run's config and metrics to the one or two config keys to change.

1. Facts from the config: mode (PPO with a critic vs group estimators), KL placement, batch layers.
2. Signals over the recent window of the metrics.
3. Every playbook rule that applies and fires becomes a diagnosis; one whose harm does not hold (a
   trend only: KL rising from zero while the score climbs) is shown as info and proposes nothing.
   Diagnoses are ranked by severity, then by the investigation order (numerics, reward, KL, advantage,
   critic, policy update, entropy, length, validation), then by how far past their thresholds they are.
4. Two kinds: learning diagnoses decide the diff. Performance and memory diagnoses are reported apart
   and decide only when no learning problem is found and their harm (a speed symptom, memory near the
   card's size) holds; their change must still fit the memory model (``advisor.memory``) on the GPU.
5. The deciding diagnosis's first fix that applies and keeps the config valid (``advisor check``'s
   rules, adjusting one dependent memory/speed key only when a change forces it) is the diff. A
   diagnosis whose remedy is outside the config (fix the reward parser) yields no diff but its
   checks. Other valid fixes of the same kind become ranked alternatives.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.checks import changes_that_hold, run_checks
from advisor.codes import FAR_OUT_OF_BAND
from advisor.errors import MetricsError
from advisor.findings import SEVERITY_ORDER, Change
from advisor.load import VerlConfig, printed_differences
from advisor.metrics import as_table, load_catalog
from advisor.plural import counted

from ._bands import far_out_of_band
from ._crosscheck import CROSSCHECK_METRICS, cross_check
from ._derived import MEMORY_SAFE
from ._diagnose import Diagnosis, diagnose
from ._rule_loader import PERFORMANCE_KEY, PERFORMANCE_TREES, TREE_PRIORITY, Rule, load_playbook
from ._signals import RunFacts, Signals, Window, run_facts
from ._transient import transient_notes

if TYPE_CHECKING:
    import pandas as pd

    from advisor.metrics import MetricFrame, StepTable

MAX_KEYS = 2
MAX_ALTERNATIVES = 5
NEEDS_GPU = "a speed/memory change needs the GPU to check it fits (pass --gpu NAME)"


@dataclass
class Suggestion:
    config: VerlConfig
    facts: RunFacts
    window: Window
    diagnoses: list[Diagnosis]
    changes: list[Change] = field(default_factory=list)
    decided_by: Diagnosis | None = None
    alternatives: list[list[Change]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the config against the metrics (_crosscheck)
    metrics: MetricFrame | None = None  # the MetricFrame read from disk (how it was read), when suggest_run read it
    uncatalogued: list[str] = field(default_factory=list)  # metric names knowledge/metrics.yaml does not know
    quiet_notes: list[str] = field(default_factory=list)  # notes that change no verdict: JSON only, not in text

    @property
    def learning(self) -> list[Diagnosis]:
        return [d for d in self.diagnoses if not d.performance]

    @property
    def performance(self) -> list[Diagnosis]:
        """Speed and memory diagnoses: reported in their own section, never ahead of a learning one."""
        return [d for d in self.diagnoses if d.performance]

    @property
    def verdict(self) -> str:
        if self.changes:
            return "change"
        if self.decided_by is not None:
            return "inspect"  # a problem whose remedy is outside the config: see its checks
        return "no change"

    @property
    def overrides(self) -> list[str]:
        return [c.override() for c in self.changes]

    def to_dict(self, metric_sources: dict[str, str] | None = None) -> dict[str, Any]:
        sources = metric_sources or {}
        return {
            "schema": 1,
            "verl_version": self.config.version,
            "mode": self.facts.to_dict(),
            "window": {"first_step": self.window.first_step, "last_step": self.window.last_step,
                       "steps": self.window.size},
            "verdict": self.verdict,
            "decided_by": self.decided_by.id if self.decided_by else None,
            "diagnoses": [d.to_dict(sources) for d in self.learning],
            "performance": [d.to_dict(sources) for d in self.performance],
            "changes": [c.to_dict() for c in self.changes],
            "alternatives": [[c.to_dict() for c in alt] for alt in self.alternatives],
            "overrides": self.overrides,
            "notes": self.notes,
            "warnings": self.warnings,
            "uncatalogued_metrics": self.uncatalogued,
            **({"metrics": self.metrics.to_dict()} if self.metrics is not None else {}),
        }


def _rank_key(d: Diagnosis) -> tuple[int, int, float]:
    return (SEVERITY_ORDER[d.severity], TREE_PRIORITY[d.rule.tree], -d.strength)


def causes_first(ranked: list[Diagnosis]) -> list[Diagnosis]:
    """Move a harmful diagnosis ahead of the ones its rule `explains` (its cause produces their symptoms)."""
    out = list(ranked)
    for cause in [d for d in ranked if d.rule.explains and d.harmful]:
        effects = [i for i, d in enumerate(out) if d.id in cause.rule.explains and d.harmful]
        if effects and effects[0] < out.index(cause):
            out.remove(cause)
            out.insert(effects[0], cause)
    return out


def config_errors(cfg: VerlConfig) -> set[tuple[str, tuple[str, ...]]]:
    """The (id, keys) of every error the pre-launch checks find: what a proposed change must not add."""
    return {(f.id, f.keys) for f in run_checks(cfg, verify_fixes=False) if f.severity == "error"}


def validated(cfg: VerlConfig, changes: tuple[Change, ...], rule: Rule,
              base_errors: set[tuple[str, tuple[str, ...]]]) -> tuple[Change, ...] | None:
    """The changes, plus at most one dependent memory/speed key verl forces, if the result is valid.

    Never proposes a memory/speed knob as the remedy of a convergence problem; such a knob may only
    follow an algorithm change that verl's batch arithmetic would otherwise reject.
    """
    if rule.tree not in PERFORMANCE_TREES and any(PERFORMANCE_KEY.search(c.key) for c in changes):
        return None
    patched = cfg.with_changes(changes)
    findings = run_checks(patched)
    new = [f for f in findings if f.severity == "error" and (f.id, f.keys) not in base_errors]
    if not new:
        return _holds(cfg, changes)
    if len(changes) >= MAX_KEYS or len(new) > 1 or len(new[0].fix) != 1:
        return None
    dependent = new[0].fix[0]
    if not PERFORMANCE_KEY.search(dependent.key) or any(c.key == dependent.key for c in changes):
        return None
    combined = (*changes, Change(dependent.key, dependent.old, dependent.new,
                                 f"keeps the config valid after {changes[0].key} changes ({new[0].id})",
                                 add=dependent.add))
    again = run_checks(cfg.with_changes(combined), verify_fixes=False)
    if any(f.severity == "error" and (f.id, f.keys) not in base_errors for f in again):
        return None
    return _holds(cfg, combined)


def _holds(cfg: VerlConfig, changes: tuple[Change, ...]) -> tuple[Change, ...] | None:
    """The diff re-checked as one raises no new warning (a new finding its own fix answers joins the diff)."""
    before = {(f.id, f.keys) for f in run_checks(cfg, verify_fixes=False)}
    held = changes_that_hold(cfg, list(changes), before)
    return None if held is None or (len(held) > MAX_KEYS and len(held) > len(changes)) else tuple(held)


def _fits(cfg: VerlConfig, changes: tuple[Change, ...], gpu_memory_gib: float | None,
          notes: list[str]) -> tuple[Change, ...] | None:
    """A speed/memory change is proposed only if the memory model says the patched config still fits."""
    from advisor.errors import ConfigError
    from advisor.memory import estimate_memory

    if all(MEMORY_SAFE.get(c.key, object()) == c.new for c in changes):
        return changes  # it only drops computed pad tokens: never more memory
    if not gpu_memory_gib:
        if NEEDS_GPU not in notes:
            notes.append(NEEDS_GPU)
        return None
    try:
        estimate = estimate_memory(cfg.with_changes(changes), gpu_memory_gib=gpu_memory_gib)
    except ConfigError as exc:  # the model is not in the catalog: cannot check, so do not propose
        notes.append(f"{changes[0].override()} not proposed: the memory model cannot check it ({exc})")
        return None
    if estimate.verdict == "oom":
        notes.append(f"{changes[0].override()} not proposed: the memory model predicts OOM in "
                     f"{estimate.peak.stage}")
        return None
    return changes


def _past_memory(cfg: VerlConfig, changes: tuple[Change, ...], gpu_memory_gib: float) -> list[str]:
    """A learning change that moves the run from fitting to OOM in the memory model: said, not undone (the change
    answers the learning problem, and a memory knob is never its remedy); `advisor check` on the patched config
    names the smallest memory-only fix. Nothing is said where the model cannot read the config."""
    from advisor.errors import ConfigError
    from advisor.memory import estimate_memory

    try:
        before = estimate_memory(cfg, gpu_memory_gib=gpu_memory_gib)
        after = estimate_memory(cfg.with_changes(changes), gpu_memory_gib=gpu_memory_gib)
    except ConfigError:
        return []
    if after.verdict != "oom" or before.verdict not in ("ok", "tight"):  # "unknown": no word on fitting
        return []
    shown = " ".join(c.override() for c in changes)
    return [f"{shown}: the memory model predicts OOM in {after.peak.stage} with it at {gpu_memory_gib:g} GiB of GPU "
            f"memory, where the run's own config fits; `advisor check` on the patched config names the smallest "
            "memory-only fix"]


def normalized_for(cfg: VerlConfig, frame: MetricFrame, facts: RunFacts | None = None) -> MetricFrame:
    """Put the run's loss metrics on one scale (the mean mini-batch loss of one optimizer step).

    verl >= 0.7.0 sums actor/pg_loss, actor/kl_loss and critic/vf_loss over every optimizer step of a
    training step; verl 0.6.x divides them by the gradient-accumulation count (advisor.metrics._loss_sums).
    """
    from advisor.metrics import normalize_loss_sums

    plan = (facts or run_facts(cfg)).plan
    strategy = str(cfg.get("actor_rollout_ref.actor.strategy"))
    if strategy not in ("fsdp", "fsdp2", "megatron"):
        return frame
    return normalize_loss_sums(
        frame, verl_version=cfg.version, optimizer_steps_per_step=max(1, plan.actor.optimizer_steps_per_step or 1),
        strategy=strategy,
        critic_optimizer_steps_per_step=(plan.critic.optimizer_steps_per_step or None) if plan.critic else None,
        grad_accum_steps=plan.actor.grad_accum_steps or None,
        critic_grad_accum_steps=(plan.critic.grad_accum_steps or None) if plan.critic else None,
        use_dynamic_bsz=plan.actor.dynamic,
    )


def read_for_rules(cfg: VerlConfig, metrics_path: str | PathLike[str], rules: Iterable[Rule] | None,
                   facts: RunFacts) -> MetricFrame:
    """The run's metrics as ``rules`` read them: only their columns and the losses (None: every column), on one
    loss scale (:func:`normalized_for`)."""
    return normalized_for(cfg, _read_raw(metrics_path, rules), facts)


def _read_raw(metrics_path: str | PathLike[str], rules: Iterable[Rule] | None) -> MetricFrame:
    from advisor.metrics import ACTOR_LOSSES, CRITIC_LOSSES, load_metrics

    columns = None if rules is None else {m for rule in rules for m in rule.metrics} | {*ACTOR_LOSSES, *CRITIC_LOSSES,
                                                                                         *CROSSCHECK_METRICS}
    return load_metrics(metrics_path, columns=columns)


def suggest_frame(cfg: VerlConfig, frame: MetricFrame, *, window: int | None = None,
                  gpu_memory_gib: float | None = None, rules: tuple[Rule, ...] | None = None,
                  facts: RunFacts | None = None) -> Suggestion:
    """The decision on a run's metrics as read (a MetricFrame on one loss scale: :func:`normalized_for`).

    ``suggest_run`` (a finished file) and ``advisor watch`` (a live run, at each step) both decide here, so the
    watch's decision at a step is suggest's on the file up to that step: the same window rule, the same harm, the
    same cross-check of config against metrics (the change starts from what the run used).
    """
    facts = facts or run_facts(cfg)
    if frame.all_nan:
        raise MetricsError("every metric is NaN or missing",
                           suggestion="the run logged no finite value; check that training steps completed")
    check = cross_check(cfg, frame, facts, version_hint=frame.version_hint)
    as_run = check.as_run(cfg)
    if as_run is not cfg:  # the batch, n or a cap the run used: every derived quantity starts from it
        facts = run_facts(as_run)
    result = suggest(as_run, frame.table, window=window, gpu_memory_gib=gpu_memory_gib, rules=rules,
                     facts=facts, logged=frame.all_metrics)
    check.apply(result, cfg)
    return result


def suggest_run(cfg: VerlConfig, metrics_path: str | Path, *, window: int | None = None,
                gpu_memory_gib: float | None = None, rules: tuple[Rule, ...] | None = None,
                every_column: bool = False) -> Suggestion:
    """Read a metrics file or run directory (any format advisor.metrics reads) and suggest.

    Only the values of the metrics the rules read are kept (a log of millions of steps is read in the memory of
    those columns); ``every_column`` keeps every metric's (the report draws more than the rules read).
    """
    playbook = rules if rules is not None else load_playbook()
    facts = run_facts(cfg)  # worked out once: the loss scale and every rule read the same facts
    raw = _read_raw(metrics_path, None if every_column else playbook)
    as_run = cross_check(cfg, raw, facts, version_hint=raw.version_hint).as_run(cfg)
    frame = normalized_for(as_run, raw, facts if as_run is cfg else run_facts(as_run))  # the run's own loss scale
    try:
        result = suggest_frame(cfg, frame, window=window, gpu_memory_gib=gpu_memory_gib, rules=rules, facts=facts)
    except MetricsError as err:
        if err.path is not None:
            raise
        raise MetricsError(err.message, path=str(metrics_path), suggestion=err.suggestion) from err  # name the file
    result.warnings[:0] = printed_differences(cfg, metrics_path)
    result.metrics = frame
    result.notes.extend(_reading_notes(frame))
    result.quiet_notes = _loss_notes_without_effect(result, cfg, raw, frame, playbook, window, gpu_memory_gib)
    return result


def _loss_notes_without_effect(result: Suggestion, cfg: VerlConfig, raw: MetricFrame, frame: MetricFrame,
                               playbook: Iterable[Rule],
                               window: int | None, gpu_memory_gib: float | None) -> list[str]:
    """The loss-scale notes (``normalize_loss_sums``) that change no verdict: losses left as logged, or rescaled
    where the run read as logged gets the same diagnoses; and a loss that could not be rescaled when no
    diagnosis reads a loss."""
    from advisor.metrics import ACTOR_LOSSES, CRITIC_LOSSES

    notes = [n for n in frame.normalizations if n not in raw.normalizations and n.startswith("loss sums: ")]
    if not notes:
        return []
    if frame.table is raw.table:  # nothing rescaled: the values are verl's own (or off-scale, if they could not be)
        reads_loss = any({*ACTOR_LOSSES, *CRITIC_LOSSES} & set(d.rule.metrics) for d in result.diagnoses)
        return [n for n in notes if "NOT rescaled" not in n or not reads_loss]
    signals = Signals(raw.table, window, gpu_memory_gib=gpu_memory_gib)
    as_logged = [d for rule in playbook if (d := diagnose(rule, cfg, result.facts, signals)) is not None]
    same = {(d.id, d.severity) for d in as_logged} == {(d.id, d.severity) for d in result.diagnoses
                                                         if d.id != FAR_OUT_OF_BAND.id}
    return notes if same else []


def _reading_notes(frame: MetricFrame) -> list[str]:
    notes = []
    if frame.lines_skipped:
        reasons = ", ".join(f"{n} {why}" for why, n in frame.skip_reasons.items())
        notes.append(f"skipped {counted(frame.lines_skipped, 'unreadable line')} ({reasons})")
    if frame.aliases:
        notes.append("read metric names as the catalog names them: " +
                     ", ".join(f"{old} -> {new}" for old, new in list(frame.aliases.items())[:5]))
    if frame.all_nan_columns:
        notes.append(f"{counted(len(frame.all_nan_columns), 'metric')} with no finite value")
    notes.extend(frame.normalizations)
    notes.extend(frame.warnings)
    return notes


def suggest(cfg: VerlConfig, frame: StepTable | MetricFrame | pd.DataFrame, *, window: int | None = None,
            gpu_memory_gib: float | None = None, rules: tuple[Rule, ...] | None = None,
            facts: RunFacts | None = None, logged: list[str] | None = None) -> Suggestion:
    """Diagnose a run and pick the diff.

    ``frame``: metrics indexed by step, one column per metric (a StepTable, a MetricFrame or a DataFrame).
    ``logged``: every metric the run logged, when ``frame`` holds the values of the playbook's only.
    """
    playbook = rules if rules is not None else load_playbook()
    known = {m for rule in playbook for m in rule.metrics}
    table = as_table(frame)
    names = logged if logged is not None else list(table.names)
    if not any(name in known for name in table.names):
        sample = ", ".join(sorted(known)[:4])
        raise MetricsError(f"none of its {counted(len(names), 'metric')} is one the playbook reads (e.g. {sample})",
                           suggestion="pass verl's metrics (file logger JSONL, console log, TensorBoard, W&B)")
    facts = facts or run_facts(cfg)
    signals = Signals(table, window, gpu_memory_gib=gpu_memory_gib)
    catalog = load_catalog()
    uncatalogued = [name for name in names if not catalog.is_known(name)]
    found = [d for rule in playbook if (d := diagnose(rule, cfg, facts, signals)) is not None]
    found += far_out_of_band(playbook, facts, signals, found)  # no blind spots (info, never a diff)
    diagnoses = causes_first(sorted(found, key=_rank_key))
    result = Suggestion(cfg, facts, signals.window, diagnoses, uncatalogued=uncatalogued)
    result.notes.extend(transient_notes(playbook, signals, cfg.version))
    if signals.derived is not None:
        result.notes.extend(signals.derived.missing)  # the flag that would enable a derived quantity's advice
    if uncatalogued:
        shown = ", ".join(uncatalogued[:5]) + (f" (+{len(uncatalogued) - 5} more)" if len(uncatalogued) > 5 else "")
        result.notes.append(f"{counted(len(uncatalogued), 'metric name')} not in the metric catalog, read by no rule: "
                            f"{shown}")
    learning = [d for d in diagnoses if d.severity != "info" and not d.performance]
    speed = [d for d in diagnoses if d.severity != "info" and d.performance]
    actionable = learning or speed  # a speed or memory problem decides only when learning is fine
    if not actionable:
        # the reason heads the notes: "No change." prints the first one
        result.notes.insert(0, "no diagnosis at warning level or above; the run looks healthy on every metric "
                            "the playbook reads" if not diagnoses else
                            "only informational findings: nothing to change")
        return result
    if learning and speed:
        result.notes.append(f"{', '.join(d.id for d in speed)}: speed/memory, reported apart; the learning "
                            "problem comes first")
    base_errors = config_errors(cfg)
    candidates: list[tuple[Diagnosis, tuple[Change, ...]]] = []
    for d in actionable:
        for _, changes in d.fixes:
            ok = validated(cfg, changes, d.rule, base_errors)
            if ok is not None and d.performance:
                ok = _fits(cfg, ok, gpu_memory_gib, result.notes)
            if ok is not None:
                candidates.append((d, ok))
    top = actionable[0]
    result.decided_by = top
    own = [c for d, c in candidates if d is top]
    if own:
        result.changes = list(own[0])
        if gpu_memory_gib and not top.performance:
            result.notes.extend(_past_memory(cfg, own[0], gpu_memory_gib))
    elif not top.fixes:
        result.notes.append(f"{top.id}: the remedy is outside the config; see its checks")
    elif top.performance and not gpu_memory_gib:  # the cause is a missing input, not an invalid config
        # said once: this note replaces the general one, and the verdict line prints it
        result.notes[:] = [n for n in result.notes if n != NEEDS_GPU]
        result.notes.append(f"{top.id}: its fixes need the GPU to check they fit in memory: pass --gpu NAME")
    else:
        result.notes.append(f"{top.id}: none of its fixes keeps the config valid")
    seen = {tuple((c.key, repr(c.new)) for c in result.changes)}
    for _, changes in candidates:
        signature = tuple((c.key, repr(c.new)) for c in changes)
        if signature not in seen:
            seen.add(signature)
            result.alternatives.append(list(changes))
        if len(result.alternatives) >= MAX_ALTERNATIVES:
            break
    if not result.changes:  # "no config change" offers none: the remedy is outside the config, or none holds
        result.alternatives = []
    return result
