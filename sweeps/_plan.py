"""The plan of a sweep: its definition (:class:`SweepSpec`), checked against the config and turned into
what every trial needs (baseline, seeds, command template, the study's fingerprint), and how a study's
trials map back onto it.
"""

from __future__ import annotations

import itertools
import math
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor import VerlConfig, load_config
from advisor.codes import UNKNOWN_KEY
from advisor.errors import ConfigError, SweepError
from advisor.verl import at_least, render_override

from ._launchers import Launcher
from ._objective import Constraint, Objective
from ._pruner import PACE
from ._race import RACE_ATTR
from ._result import TrialRecord
from ._space import Param, same_point
from ._storage import fingerprint_hash, import_optuna
from ._trial import TrialTemplate, join_pythonpath
from ._verdict import LEVEL, MIN_PAIRS

SEED_KEYS = ("sandbox.seed", "actor_rollout_ref.actor.data_loader_seed", "data.seed")
"""keys a trial's seed is written to by default, those the config has: the sandbox trainer's seed of everything
random (only when a config sets it; it wins over the other two there, so it comes first and seed 0 keeps its
value), the actor's mini-batch shuffle and the data loader"""
DEFAULT_SEEDS = 3
DEFAULT_TPE_TRIALS = 10
WARMUP_FRACTION = 0.1
"""default pruning warm-up: no trial is pruned before this share of the steps (and never before step 3)"""
MIN_WARMUP_STEPS = 3
_FILE_LOGGER_SINCE = "0.6.0"  # verl's `file` logger backend exists from v0.6.0 (PR #3363)


@dataclass
class SweepSpec:
    """What to sweep and how to judge it.

    Args:
        params: the swept keys; one grid :class:`Param` makes a grid sweep, anything else a TPE search.
        objective: the metric to optimise and its direction.
        steps: ``trainer.total_training_steps`` of every trial (at least 1).
        constraints: bounds each trial's metrics must keep.
        seeds: seeds per compared value (at least 1; the verdict needs ``min_pairs`` of them).
        seed_keys: config keys that receive a trial's seed (default: those of :data:`SEED_KEYS` the config
            has). Seed ``i`` is the config's own seed (the first of these keys with an integer value) plus ``i``.
        trials: TPE only: how many values to explore on the first seed (default 10).
        prune: stop trials that fall behind the pace of another value on the same seed (``_pruner``).
        race: stop the trial that has outrun every other value on its seed once the others were pruned
            (``_race``; needs ``prune``).
        every_seed: grid only: run every value on every seed. Default (with ``prune`` and at least
            ``min_pairs`` seeds): every value on the first seed, then the candidates on the other seeds one at
            a time, in the first seed's order, until one is confirmed (:attr:`Plan.staged`).
        warmup_steps: no pruning before this step (default: 10% of ``steps``, at least 3).
        pace: the pruner's pace in (0, 1]: stop a trial worse at step t than another value was at step
            ``pace * t`` (default 0.4; 1 compares at equal steps, which misjudges slow starters).
        min_pairs: paired seeds a candidate needs before the fix can be confirmed (at least 2).
        level: confidence level of the verdict's interval.
        protected: values (``{key: value}``) the pruner stops only once each other protected value has reached
            the step on the same seed (``_pruner``); ``advisor verify`` protects the baseline and the proposal.
    """

    params: list[Param]
    objective: Objective
    steps: int
    constraints: list[Constraint] = field(default_factory=list)
    seeds: int = DEFAULT_SEEDS
    seed_keys: list[str] | None = None
    trials: int | None = None
    prune: bool = True
    race: bool = True
    every_seed: bool = False
    warmup_steps: int | None = None
    pace: float = PACE
    min_pairs: int = MIN_PAIRS
    level: float = LEVEL
    protected: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not self.params:
            raise SweepError("a sweep needs at least one --param")
        keys = [p.key for p in self.params]
        if len(set(keys)) != len(keys):
            raise SweepError(f"--param {next(k for k in keys if keys.count(k) > 1)} is given twice")
        if self.steps < 1:
            raise SweepError(f"--steps must be at least 1 but got {self.steps}")
        if self.seeds < 1:
            raise SweepError(f"--seeds must be at least 1 but got {self.seeds}")
        if self.trials is not None and self.trials < 1:
            raise SweepError(f"--trials must be at least 1 but got {self.trials}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise SweepError(f"--warmup-steps must be at least 0 but got {self.warmup_steps}")
        if self.min_pairs < 2:
            raise SweepError(f"min_pairs must be at least 2 but got {self.min_pairs}")
        if not 0 < self.pace <= 1:
            raise SweepError(f"pace must be in (0, 1] but got {self.pace}")
        if self.every_seed and not self.is_grid:
            raise SweepError("--every-seed applies to a grid (one --param with --values); a TPE search runs its "
                             "best value on every seed already")

    @property
    def is_grid(self) -> bool:
        return len(self.params) == 1 and self.params[0].is_grid

    @property
    def warmup(self) -> int:
        if self.warmup_steps is not None:
            return self.warmup_steps
        return max(MIN_WARMUP_STEPS, math.ceil(WARMUP_FRACTION * self.steps))

    @property
    def metrics(self) -> list[str]:
        return [self.objective.metric, *(c.metric for c in self.constraints if c.metric != self.objective.metric)]


@dataclass
class Plan:
    cfg: VerlConfig
    spec: SweepSpec
    baseline: dict[str, Any]
    seeds: list[int]
    seed_keys: list[str]
    template: TrialTemplate
    grid_values: list[Any]  # grid mode: the values of the one swept key, baseline first; TPE: []
    distributions: dict[str, Any]
    n_explore: int
    fingerprint: dict[str, Any]

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.spec.params]

    @property
    def is_grid(self) -> bool:
        return bool(self.grid_values)

    @property
    def staged(self) -> bool:
        """A grid confirmed in turn: every value on the first seed, then the candidates one at a time, in the
        first seed's order, on the other seeds (with the baseline) until one is confirmed. Without pruning a
        grid runs in full (it is the reference the pruned sweeps are measured against); with fewer seeds than a
        confirmation needs (``min_pairs``) every value runs on every seed, since nothing can be confirmed and
        the curves are all such a sweep gives."""
        return self.is_grid and self.spec.prune and not self.spec.every_seed and len(self.seeds) >= self.spec.min_pairs

    @property
    def total_trials(self) -> int:
        """Trials the sweep runs at most (a staged grid usually stops well short of it)."""
        if self.is_grid:
            return len(self.grid_values) * len(self.seeds)
        return 1 + self.n_explore + 2 * (len(self.seeds) - 1)

    def role(self, values: dict[str, Any]) -> str:
        return "baseline" if same_point(values, self.baseline) else "candidate"


def _logger_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _base_argv(cfg: VerlConfig, command: str | Sequence[str] | None, overrides: Sequence[str],
               local: bool = True) -> list[str]:
    launch = cfg.launch
    if command is not None:
        program = shlex.split(command) if isinstance(command, str) else list(command)
        if not program:
            raise SweepError("--command is empty")
        program[0] = _from_here(program[0])
        if local and is_sandbox(program) and program[0] in _BARE_PYTHON:
            # the sandbox is this package: the interpreter running the advisor has its dependencies (numpy),
            # the first `python` on PATH may not
            program[0] = sys.executable
        if launch is not None:
            own = list(launch.overrides)
        else:
            own = [render_override(s.key, s.value, add=not _in_defaults(cfg, s.key)) for s in _yaml_settings(cfg)]
        return [*program, *own, *overrides]
    if launch is None:
        raise SweepError("the config is not a launch script, so there is no training command to run",
                         path=cfg.path, suggestion="pass --command 'python3 -m verl.trainer.main_ppo ...'")
    if launch.unresolved:
        names = ", ".join(f"${n}" for n in sorted(launch.unresolved))
        raise SweepError(f"the verl command uses {names}, which the script does not set", path=cfg.path,
                         where=launch.line, suggestion="set it in the script, or pass --command")
    return [*launch.argv, *overrides]


_BARE_PYTHON = ("python", "python3")


def is_sandbox(argv: Sequence[str]) -> bool:
    """Whether a command runs this package's CPU sandbox (``python -m sweeps.sandbox``)."""
    return any(a == "-m" and b == "sweeps.sandbox" for a, b in itertools.pairwise(argv[:4]))


def _from_here(program: str) -> str:
    """A program given as a relative path (``./train.sh``, ``.venv/bin/python``) names a file from where the
    sweep is started; a trial runs in its own directory, so it gets the absolute path. A bare name (``python``)
    is left to the trial's PATH, which on a Ray cluster is the node's."""
    if os.sep in program and not os.path.isabs(program):
        return os.path.abspath(program)
    return program


def _yaml_settings(cfg: VerlConfig) -> list[Any]:
    from advisor.verl import OverrideKind

    return [s for s in cfg.settings if s.kind is not OverrideKind.DELETE and s.where != "command line"]


def _in_defaults(cfg: VerlConfig, key: str) -> bool:
    return cfg.has(key) and not key.startswith("sandbox.")


def _check_keys(cfg: VerlConfig, source: Any, overrides: Sequence[str], keys: Sequence[str], option: str) -> None:
    """Every key exists (``advisor check``'s L001, with its did-you-mean); ``sandbox.*`` keys are the sandbox's."""
    for key in keys:
        if cfg.has(key) or key.startswith("sandbox."):
            continue
        probe = load_config(source, [*overrides, render_override(key, 0)], verl_version=cfg.version)
        unknown = next((f for f in probe.findings if f.id == UNKNOWN_KEY.id and key in f.keys), None)
        raise SweepError(f"{option} {key}: " + (unknown.message if unknown else "not a key of this config"))


def _check_values(cfg: VerlConfig, source: Any, overrides: Sequence[str], params: Sequence[Param],
                  baseline: dict[str, Any]) -> None:
    """Every swept value has a type verl accepts for its key (``advisor check``'s findings on the key)."""
    known = {(f.id, f.message) for f in cfg.findings}
    for p in params:
        probes = p.grid_values(baseline[p.key])[1:] if p.is_grid else [p.low, p.high]
        for value in probes[:20]:
            text = render_override(p.key, value, add=not _in_defaults(cfg, p.key))
            try:
                probe = load_config(source, [*overrides, text], verl_version=cfg.version)
            except ConfigError as err:
                raise SweepError(f"--param {p.key}: {err.message}") from err
            for f in probe.findings:
                if f.severity == "error" and p.key in f.keys and (f.id, f.message) not in known:
                    raise SweepError(f"--param {p.key}: {f.message}")


def make_plan(config: str | Path | VerlConfig | None, spec: SweepSpec, command: str | Sequence[str] | None,
          overrides: Sequence[str], launcher: Launcher, verl_version: str | None) -> Plan:
    import_optuna()
    source: str | Path | None
    if isinstance(config, VerlConfig):
        cfg, source = config, config.path
    else:
        cfg, source = load_config(config, list(overrides), verl_version=verl_version), config
    _check_keys(cfg, source, overrides, [p.key for p in spec.params], "--param")
    baseline = {p.key: cfg.get(p.key) if cfg.has(p.key) else None for p in spec.params}
    for key, value in baseline.items():
        if not (value is None or isinstance(value, (bool, int, float, str))):
            raise SweepError(f"--param {key}: its current value {value!r} is a {type(value).__name__}; "
                             "only numbers, strings and booleans can be swept")
    _check_values(cfg, source, overrides, spec.params, baseline)

    seed_keys = list(spec.seed_keys) if spec.seed_keys is not None else [k for k in SEED_KEYS if cfg.has(k)]
    _check_keys(cfg, source, overrides, seed_keys, "--seed-key")
    if spec.seeds > 1 and not seed_keys:
        raise SweepError("the config has none of the usual seed keys", suggestion="pass --seed-key KEY")
    if set(seed_keys) & {p.key for p in spec.params}:
        raise SweepError("a seed key cannot also be a swept --param")
    own = next((v for v in (cfg.get(k) for k in seed_keys) if isinstance(v, int) and not isinstance(v, bool)), 0)
    seeds = [int(own) + i for i in range(spec.seeds)]

    console = launcher.console_metrics or not at_least(cfg.version, _FILE_LOGGER_SINCE)
    base_argv = _base_argv(cfg, command, overrides, local=getattr(launcher, "name", "local") == "local")
    experiment = cfg.get("trainer.experiment_name")
    template = TrialTemplate(
        base_argv=base_argv,
        logger=_logger_list(cfg.get("trainer.logger")),
        experiment_name=str(experiment) if experiment is not None else None,
        console_metrics=console,
        pythonpath=join_pythonpath(os.getcwd(), os.environ.get("PYTHONPATH")),
        existing_keys=frozenset(k for k in [*baseline, *seed_keys] if _in_defaults(cfg, k)),
    )
    distributions = {p.key: p.distribution(baseline[p.key]) for p in spec.params}
    grid_values = spec.params[0].grid_values(baseline[spec.params[0].key]) if spec.is_grid else []
    n_explore = spec.trials if spec.trials is not None else DEFAULT_TPE_TRIALS
    fingerprint = {
        "params": [p.to_dict() for p in spec.params],
        "baseline": baseline,
        "objective": spec.objective.to_dict(),
        "constraints": [c.to_dict() for c in spec.constraints],
        "steps": spec.steps,
        "seeds": seeds,
        "seed_keys": seed_keys,
        "command": base_argv,
        "trials": None if grid_values else n_explore,
        "metrics_from": "console" if console else "file",
    }
    return Plan(cfg, spec, baseline, seeds, seed_keys, template, grid_values, distributions, n_explore, fingerprint)


def default_study_name(fingerprint: dict[str, Any]) -> str:
    """``sweep-<last part of each key>-<hash of the sweep definition>``: the same sweep gets the same name."""
    keys = [p["key"].rsplit(".", 1)[-1] for p in fingerprint["params"]]
    return f"sweep-{'-'.join(keys)}-{fingerprint_hash(fingerprint)}"


# ---------------------------------------------------------------------------------------------------------------
# reading a study back onto the plan


def values_of(ft: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The swept values of a trial (a WAITING one has them only as its enqueued fixed params)."""
    params = ft.params if ft.params else ft.system_attrs.get("fixed_params", {})
    return {k: params.get(k) for k in keys}


def seed_of(ft: Any, plan: Plan) -> int:
    seed = ft.user_attrs.get("seed")
    return plan.seeds[0] if seed is None else int(seed)  # trials asked from the sampler run on the first seed


def ignored(ft: Any) -> bool:
    """A trial that does not count: interrupted (re-queued as a new trial) or a duplicate grid point."""
    return bool(ft.user_attrs.get("interrupted") or ft.user_attrs.get("duplicate"))


def state_name(ft: Any) -> str:
    if ignored(ft):
        return "interrupted"
    if ft.state.name == "COMPLETE" and ft.user_attrs.get(RACE_ATTR):
        return "stopped"
    if ft.state.name == "FAIL" and ft.user_attrs.get("diverged"):
        return "diverged"
    return {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running",
            "WAITING": "waiting"}[ft.state.name]


def record_of(ft: Any, plan: Plan) -> TrialRecord:
    """One Optuna trial (a FrozenTrial) as the sweep reports it."""
    values = values_of(ft, plan.keys)
    role = ft.user_attrs.get("role") or ("explore" if not plan.is_grid else plan.role(values))
    curve = {int(s): float(v) for s, v in ft.intermediate_values.items() if v is not None and math.isfinite(v)}
    constraints = ft.user_attrs.get("constraints") or {}
    feasible = None
    if ft.state.name in ("COMPLETE", "PRUNED"):
        holds = [c.holds(constraints.get(c.metric)) for c in plan.spec.constraints]
        feasible = False if False in holds else (None if None in holds else True)
    diverged = ft.user_attrs.get("diverged")
    return TrialRecord(
        number=ft.number, values=values, seed=seed_of(ft, plan), role=role, state=state_name(ft),
        objective=curve[max(curve)] if curve and not diverged else None, steps=max(curve) if curve else None,
        constraints=constraints, feasible=feasible, reason=ft.user_attrs.get("reason"),
        dir=ft.user_attrs.get("dir"), curve=curve, diverged=diverged if isinstance(diverged, dict) else None,
    )
