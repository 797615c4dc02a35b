"""The verify plan: the values to sweep, the objective and constraints, the trial length, each value checked
before a trial starts (knowledge/verify.yaml; the package docstring says how they are chosen)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from advisor.datafiles import knowledge_dir, load_knowledge
from advisor.errors import AdvisorError, ConfigError, PlaybookError, SweepError
from advisor.findings import Change
from advisor.load import VerlConfig
from advisor.memory import estimate_memory
from advisor.metrics import load_catalog
from advisor.playbook import PERFORMANCE_KEY, TREES, Suggestion, config_errors, validated
from advisor.verl import parse_override

from .._objective import Constraint, Objective
from .._plan import _base_argv, is_sandbox
from .._settings import RunSettings
from .._space import Param, format_value, same_value
from ._length import trial_length
from ._sandbox_scale import SandboxScale, sandbox_scale

VERIFY_FILE = "verify.yaml"
WARMUP_SHARE = 1 / 3
"""no pruning before this share of the steps"""
VALIDATIONS = 6
"""a trial judged on validation validates about this many times (trainer.test_freq = ceil(steps / 6))"""
PERFORMANCE_TREES = ("memory", "throughput")
_MEMORY_KEY = re.compile(r"(batch_size|max_token_len|response_length|prompt_length|rollout\.n$|offload|"
                         r"gpu_memory_utilization|checkpointing)")


@dataclass(frozen=True)
class VerifySettings:
    """Everything ``advisor verify`` is asked, from the CLI to the sweep runner.

    Args:
        steps: ``trainer.total_training_steps`` of each trial (default: the run's last step, at least 10).
        seeds: paired seeds per value.
        window: suggest's recent window, in steps.
        rules: suggest's playbook (default: every rule).
        propose: ``KEY=VALUE`` changes to verify instead of suggest's diff (a change the user names).
        prune, race: as for ``advisor sweep``.
        warmup_share: no pruning before this share of the steps (at least a third).
        gpu_memory_gib: the GPU's memory; every value must then fit by the memory model.
        own_scale: run the CPU sandbox at the config's own sizes, not the sandbox's scale (``_sandbox_scale``).
        run: how and where the trials run (:class:`RunSettings`).
    """

    steps: int | None = None
    seeds: int = 3
    window: int | None = None
    rules: tuple[Any, ...] | None = None
    propose: tuple[str, ...] = ()
    prune: bool = True
    race: bool = True
    warmup_share: float = WARMUP_SHARE
    gpu_memory_gib: float | None = None
    own_scale: bool = False
    run: RunSettings = field(default_factory=RunSettings)

    def with_run(self, **changes: Any) -> VerifySettings:
        """A copy whose :class:`RunSettings` has some fields changed."""
        return replace(self, run=self.run.with_(**changes))

    def __post_init__(self) -> None:
        object.__setattr__(self, "propose", tuple(self.propose))
        if not WARMUP_SHARE - 1e-9 <= self.warmup_share < 1:
            raise SweepError(f"the pruning warm-up must be at least a third of the steps, got {self.warmup_share:g}")


def load_goals() -> dict[str, TreeGoal]:
    """knowledge/verify.yaml, checked: every tree has a goal; every bound is a published healthy range."""
    path = knowledge_dir() / VERIFY_FILE
    data = load_knowledge(VERIFY_FILE)
    trees = data.get("trees") if isinstance(data, dict) else None
    if not isinstance(trees, dict):
        raise PlaybookError("needs a 'trees' mapping", path=str(path))
    catalog = load_catalog()
    goals: dict[str, TreeGoal] = {}
    for tree in TREES:
        raw = trees.get(tree)
        if not isinstance(raw, dict) or not isinstance(raw.get("objective"), dict):
            raise PlaybookError(f"tree '{tree}' has no objective", path=str(path))
        metric, goal = raw["objective"].get("metric"), raw["objective"].get("goal")
        if goal not in ("max", "min") or not catalog.is_known(str(metric)):
            raise PlaybookError(f"tree '{tree}': objective needs a known metric and goal max|min", path=str(path))
        constraints = []
        for key, op, bound in (("below_healthy", "<=", "high"), ("above_healthy", ">=", "low")):
            for name in raw.get(key) or []:
                info = catalog.lookup(name)
                value = getattr(info.healthy, bound, None) if info and info.healthy else None
                if value is None:
                    raise PlaybookError(f"tree '{tree}': {name} has no healthy {bound} bound in the metrics "
                                        "catalog", path=str(path))
                constraints.append(Constraint(name, op, float(value)))
        goals[tree] = TreeGoal(tree, Objective(str(metric), "maximize" if goal == "max" else "minimize"),
                               tuple(constraints), str(raw.get("why", "")))
    unknown = set(trees) - set(TREES)
    if unknown:
        raise PlaybookError(f"unknown tree(s): {', '.join(sorted(unknown))}", path=str(path))
    return goals


@dataclass(frozen=True)
class ValidationGoal:
    """The held-out objective (``knowledge/verify.yaml`` ``validation``) and which keys game the training score."""

    objective: Objective
    games: tuple[re.Pattern[str], ...]
    why_games: str
    why_logged: str

    def gamed_by(self, key: str) -> bool:
        return any(p.search(key) for p in self.games)


@dataclass(frozen=True)
class KeyRange:
    """The customary range of a swept key (``knowledge/verify.yaml`` ``ranges``)."""

    low: float
    high: float
    scale: str  # linear | log | int
    source: str

    def holds(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.low <= value <= self.high


def load_validation() -> ValidationGoal:
    path = knowledge_dir() / VERIFY_FILE
    raw = load_knowledge(VERIFY_FILE).get("validation")
    if not isinstance(raw, dict) or not isinstance(raw.get("objective"), dict):
        raise PlaybookError("needs a 'validation' mapping with an objective", path=str(path))
    goal = raw["objective"].get("goal")
    if goal not in ("max", "min"):
        raise PlaybookError("validation: objective needs goal max|min", path=str(path))
    try:
        games = tuple(re.compile(str(x)) for x in raw.get("games_training_score") or [])
    except re.error as err:
        raise PlaybookError(f"validation: games_training_score: {err}", path=str(path)) from err
    return ValidationGoal(Objective(str(raw["objective"]["metric"]), "maximize" if goal == "max" else "minimize"),
                          games, str(raw.get("why_games", "")), str(raw.get("why_logged", "")))


def load_ranges() -> dict[str, KeyRange]:
    path = knowledge_dir() / VERIFY_FILE
    out = {}
    for key, raw in (load_knowledge(VERIFY_FILE).get("ranges") or {}).items():
        if not isinstance(raw, dict) or raw.get("scale") not in ("linear", "log", "int") or not raw.get("source"):
            raise PlaybookError(f"ranges: {key} needs low, high, scale linear|log|int and a source", path=str(path))
        low, high = float(raw["low"]), float(raw["high"])
        if not low < high or (raw["scale"] == "log" and low <= 0):
            raise PlaybookError(f"ranges: {key}: low must be below high (and above 0 on a log scale)", path=str(path))
        out[str(key)] = KeyRange(low, high, str(raw["scale"]), str(raw["source"]))
    return out


def step_beyond(old: Any, new: Any) -> Any | None:
    """The value one step past ``new`` in the direction ``old -> new``; None when there is no such step.

    Positive floats step by the same ratio (lr 1e-6 -> 5e-7 gives 2.5e-7), integers by the same
    difference (n 1 -> 5 gives 9; never below 1), a float from 0 by the same difference. Booleans and
    strings have none.
    """
    if isinstance(old, bool) or isinstance(new, bool) or not isinstance(old, (int, float)) \
            or not isinstance(new, (int, float)) or old == new:
        return None
    if isinstance(old, int) and isinstance(new, int):
        beyond = new + (new - old)
        return beyond if beyond >= 1 else None
    old_f, new_f = float(old), float(new)
    if old_f > 0 and new_f > 0:
        return float(f"{new_f * (new_f / old_f):.6g}")
    past = new_f + (new_f - old_f)
    return float(f"{past:.6g}") if past >= 0 or new_f < 0 else None


BIG_MOVE = 4.0  # a proposal that moves a positive number by more than this ratio gets a midpoint, not a step beyond


def third_value(old: Any, new: Any, limits: KeyRange | None = None) -> tuple[Any, str] | None:
    """The third value to sweep beside ``old`` and ``new``, and what it is: one step beyond ``new``
    (:func:`step_beyond`), or the geometric midpoint (two significant digits) when ``new`` is more than
    ``BIG_MOVE`` times ``old`` or less than a ``BIG_MOVE``-th of it; None when there is none.

    With the key's customary range ``limits``: a value outside it becomes the range's bound beyond ``new``
    (when there is room past ``new``), else the midpoint of ``old`` and ``new`` on the range's scale, itself
    kept inside the range (entropy_coeff 0 -> 0.5 gets 0.01, not 0.25)."""
    if isinstance(old, float) and isinstance(new, float) and old > 0 and new > 0 and \
            max(new / old, old / new) > BIG_MOVE:
        found: tuple[Any, str] | None = (float(f"{math.sqrt(old * new):.2g}"), "midpoint")
    else:
        beyond = step_beyond(old, new)
        found = None if beyond is None else (beyond, "one step beyond")
    if limits is None or found is None or limits.holds(found[0]):
        return found
    value = found[0]
    bound = limits.high if value > new else limits.low
    if limits.scale == "int":
        bound = int(bound)
    elif isinstance(new, float):
        bound = float(bound)
    if (bound - new) * (value - new) > 0 and not same_value(bound, new):
        return bound, "the customary range's bound"
    if limits.scale == "log" and old > 0 and new > 0:
        mid: Any = float(f"{math.sqrt(old * new):.2g}")
    elif limits.scale == "int":
        mid = round((old + new) / 2)
    else:
        mid = float(f"{(old + new) / 2:.2g}")
    what = "midpoint"
    if not limits.holds(mid):  # both values are outside the range on one side: its bound between them
        mid, what = min(max(mid, type(mid)(limits.low)), type(mid)(limits.high)), "the customary range's bound"
    if same_value(mid, old) or same_value(mid, new):
        return None
    return mid, what


@dataclass(frozen=True)
class TreeGoal:
    """What a fix of one debug tree must improve (objective) and keep (constraints)."""

    tree: str
    objective: Objective
    constraints: tuple[Constraint, ...]
    why: str


NO_TREE = "none"


@dataclass
class VerifyPlan:
    """The sweep ``advisor verify`` runs for a suggestion (or a change the user named)."""

    suggestion: Suggestion
    params: list[Param]
    fixed: list[Change]  # dependent memory/speed keys applied to every trial
    goal: TreeGoal
    steps: int
    notes: list[str] = field(default_factory=list)
    objective: Objective | None = None  # what the trials are judged on (default: the tree's objective)
    objective_why: str = ""
    trial_overrides: list[str] = field(default_factory=list)  # validation settings every trial gets
    warmup: int = 0
    named: bool = False  # the change came from --propose, not from suggest
    roles: dict[str, Any] = field(default_factory=dict)  # baseline / proposed / third -> the value
    asked_steps: int | None = None  # the steps asked (--steps or the run's), when the trials train fewer
    steps_known: bool = True  # False: a trial may stop before ``steps`` (the end of its epochs; ``_length``)

    def __post_init__(self) -> None:
        if self.objective is None:
            self.objective = self.goal.objective
            self.objective_why = self.objective_why or self.goal.why

    @property
    def fixed_overrides(self) -> list[str]:
        return [c.override() for c in self.fixed]

    def point(self, role: str) -> dict[str, Any] | None:
        if len(self.params) != 1 or role not in self.roles:
            return None
        return {self.params[0].key: self.roles[role]}

    def to_dict(self) -> dict[str, Any]:
        d = self.suggestion.decided_by
        assert self.objective is not None
        return {
            "decided_by": None if self.named or d is None else d.id,
            "named": self.named,
            "tree": self.goal.tree,
            "params": [{"key": p.key, "values": list(p.values or ())} for p in self.params],
            "roles": self.roles,
            "fixed": self.fixed_overrides,
            "trial_overrides": self.trial_overrides,
            "objective": self.objective.to_dict(),
            "objective_why": self.objective_why,
            "constraints": [c.to_dict() for c in self.goal.constraints],
            "why": self.goal.why,
            "steps": self.steps,
            "steps_asked": self.asked_steps or self.steps,
            "steps_known": self.steps_known,
            "warmup_steps": self.warmup,
            "notes": list(self.notes),
        }


def plan_verify(suggestion: Suggestion, settings: VerifySettings | None = None, *,
                steps: int | None = None) -> VerifyPlan:
    """The sweep that tests ``suggestion``'s diff, or the change ``settings.propose`` names.

    Raises:
        SweepError: there is nothing to verify (no change proposed, or the remedy is outside the config), or a
            named change that verl would reject.
    """
    settings = settings or VerifySettings()
    cfg = suggestion.config
    named = bool(settings.propose)
    if named:
        changes = _named_changes(cfg, settings.propose)
        rule = suggestion.decided_by.rule if suggestion.decided_by is not None else None
    else:
        if not suggestion.changes or suggestion.decided_by is None:
            d = suggestion.decided_by
            reason = (f"{d.id}'s remedy is outside the config; see `advisor suggest`" if d is not None
                      else "the run looks healthy on every metric the playbook reads")
            raise SweepError(f"nothing to verify: advisor suggest proposes no config change ({reason})",
                             suggestion="name a change to test with --propose KEY=VALUE")
        changes, rule = list(suggestion.changes), suggestion.decided_by.rule
    goals = load_goals()
    goal = goals[rule.tree] if rule is not None else TreeGoal(
        NO_TREE, Objective("critic/score/mean", "maximize"), (), "no diagnosis: the change is judged on the score")
    performance = goal.tree in PERFORMANCE_TREES
    primary = [c for c in changes if named or performance or not PERFORMANCE_KEY.search(c.key)]
    fixed = [c for c in changes if c not in primary]
    notes: list[str] = []
    if fixed and config_errors(cfg.with_changes(fixed)) - config_errors(cfg):
        raise SweepError(f"cannot verify {suggestion.decided_by.id if suggestion.decided_by else 'the'} diff on a "
                         f"paired baseline: {', '.join(c.override() for c in fixed)} is only valid together with "
                         "the fix")
    ranges = load_ranges()
    params, roles = [], {}
    for change in primary:
        _check_value(cfg, fixed, change, change.new, rule, settings, notes, named=named)
        values = [change.old, change.new]
        if len(primary) == 1:
            roles = {"baseline": change.old, "proposed": change.new}
            third = third_value(change.old, change.new, ranges.get(change.key))
            if third is not None:
                value, what = third
                rejected = _rejected(cfg, fixed, change, value, rule, settings)
                if rejected is None:
                    values.append(value)
                    roles["third"] = value
                    notes.append(f"{change.key}={format_value(value)}: the third value, {_what(what, change)}")
                else:
                    notes.append(f"{change.key}={format_value(value)} ({what}) left out: {rejected}")
        params.append(Param.grid(change.key, values))
    asked = settings.steps if settings.steps is not None else steps if steps is not None else \
        _observed_steps(suggestion)
    if fixed:
        notes.append("applied to every trial (memory/speed only): " + ", ".join(c.override() for c in fixed))
    scale = SandboxScale()
    if not settings.own_scale and _runs_sandbox(cfg, settings.run):
        scale = sandbox_scale(cfg, settings.run.overrides, [*(p.key for p in params), *(c.key for c in fixed)],
                              steps_given=settings.steps is not None or steps is not None)
        asked = min(asked, scale.steps) if scale.steps is not None else asked
        notes += scale.notes
    points = [{p.key: v} for p in params[:1] for v in (p.values or ())] if len(params) == 1 else [{}]
    length = trial_length(cfg, settings.run.command,
                          [*settings.run.overrides, *(c.override() for c in fixed), *scale.overrides],
                          points, asked, suggestion.window.last_step if suggestion.window.size else None)
    run_steps = length.runs
    if length.note:
        notes.append(length.note)
    plan = VerifyPlan(suggestion, params, fixed, goal, run_steps, notes, named=named, roles=roles,
                      warmup=max(1, math.ceil(settings.warmup_share * run_steps)),
                      asked_steps=asked if asked != run_steps else None, steps_known=length.steps is not None,
                      trial_overrides=scale.overrides)
    if not performance:
        _choose_objective(plan, [p.key for p in params], _logged_validation(suggestion))
    return plan


def _runs_sandbox(cfg: VerlConfig, run: RunSettings) -> bool:
    """Whether the trials run this package's CPU sandbox (``--command 'python -m sweeps.sandbox'``)."""
    try:
        return is_sandbox(_base_argv(cfg, run.command, run.overrides))
    except (AdvisorError, ValueError):  # no command it can run: the sweep says so when it starts
        return False


def _what(what: str, change: Change) -> str:
    if what == "midpoint":
        return f"the midpoint of {format_value(change.old)} and {format_value(change.new)}"
    if what == "one step beyond":
        return f"one step beyond the proposal ({format_value(change.old)} -> {format_value(change.new)})"
    return f"{what} (knowledge/verify.yaml ranges)"


def _named_changes(cfg: VerlConfig, propose: Sequence[str]) -> list[Change]:
    changes = []
    for text in propose:
        try:
            override = parse_override(text)
        except ConfigError as err:
            raise SweepError(f"--propose {text}: {err.message}") from err
        if override.value is None or "=" not in text or override.key.startswith(("~", "+")):
            raise SweepError(f"--propose {text}: give KEY=VALUE, a key of the config and its new value")
        key = override.key.lstrip("+")
        if not cfg.has(key) and not key.startswith("sandbox."):
            raise SweepError(f"--propose {text}: {key} is not a key of this config")
        old = cfg.get(key) if cfg.has(key) else None
        if same_value(old, override.value):
            raise SweepError(f"--propose {text}: the config already has {key}={format_value(old)}")
        changes.append(Change(key, old, override.value, "named with --propose", add=not cfg.has(key)))
    return changes


def _rejected(cfg: VerlConfig, fixed: Sequence[Change], change: Change, value: Any, rule: Any,
              settings: VerifySettings) -> str | None:
    """Why verl (``advisor check``'s rules) or the memory model rejects ``change.key=value``; None when neither."""
    base = cfg.with_changes(fixed)
    trial = (Change(change.key, change.old, value, change.reason, add=change.add),)
    if rule is not None:
        ok = validated(base, trial, rule, config_errors(base))
        if ok is None or len(ok) != 1:
            return "advisor check rejects it"
    else:
        new = config_errors(base.with_changes(trial)) - config_errors(base)
        if new:
            return "advisor check rejects it (" + ", ".join(sorted(i for i, _ in new)) + ")"
    if settings.gpu_memory_gib:
        try:
            estimate = estimate_memory(base.with_changes(trial), gpu_memory_gib=settings.gpu_memory_gib)
        except ConfigError:
            return None  # the model is not in the memory catalog: nothing to check it against
        if estimate.verdict == "oom":
            return f"the memory model predicts out of memory in {estimate.peak.stage}"
    return None


def _check_value(cfg: VerlConfig, fixed: Sequence[Change], change: Change, value: Any, rule: Any,
                 settings: VerifySettings, notes: list[str], *, named: bool) -> None:
    if named:  # suggest validated its own diff; a named change is checked here
        reason = _rejected(cfg, fixed, change, value, None, settings)
        if reason is not None:
            raise SweepError(f"--propose {change.key}={format_value(value)}: {reason}")
    if not settings.gpu_memory_gib and _MEMORY_KEY.search(change.key):
        notes.append(f"{change.key} changes memory: pass --gpu NAME to check every value against the memory model")


def _logged_validation(suggestion: Suggestion) -> bool:
    frame = suggestion.metrics
    names = getattr(getattr(frame, "table", None), "names", ()) if frame is not None else ()
    return any(str(n).startswith("val-core/") for n in names)


def _choose_objective(plan: VerifyPlan, keys: Sequence[str], logged: bool) -> None:
    """Held-out validation when a key games the training score or the run validated; the trials then validate."""
    validation = load_validation()
    gamed = [k for k in keys if validation.gamed_by(k)]
    if not gamed and not logged:
        plan.objective_why = f"{plan.goal.why} (the run logs no validation, and {', '.join(keys)} cannot game it)"
        return
    plan.objective = validation.objective
    plan.objective_why = f"{', '.join(gamed)}: {validation.why_games}" if gamed else validation.why_logged
    cfg = plan.suggestion.config
    own = cfg.get("trainer.test_freq") if cfg.has("trainer.test_freq") else None
    freq = max(1, math.ceil(plan.steps / VALIDATIONS))
    if isinstance(own, int) and not isinstance(own, bool) and 0 < own < freq:
        freq = own
    validating = [f"trainer.test_freq={freq}"]
    if cfg.has("trainer.val_before_train"):  # step 0 is the same policy for every value: it decides nothing
        validating.append("trainer.val_before_train=false")
    plan.trial_overrides += validating
    plan.warmup = max(plan.warmup, freq)
    plan.notes.append(f"every trial validates every {freq} steps ({' '.join(validating)}); "
                      f"no pruning before step {plan.warmup}")


def _observed_steps(suggestion: Suggestion) -> int:
    """As many steps as the run that showed the problem (its last logged step), at least 10."""
    last = suggestion.window.last_step if suggestion.window.size else 0
    return max(10, int(last))
