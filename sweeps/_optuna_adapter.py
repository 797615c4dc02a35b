"""The one place that reaches past Optuna's public API, and the study's trials read as the schedule's plain data.

The driver must change a stored trial it did not ask for (a RUNNING trial whose driver died: mark it interrupted;
a WAITING trial that must go behind a re-queued one: take it before another driver does). Optuna's public API
only hands out a live ``Trial`` from ``study.ask()``, so these go through ``Trial(study, trial_id)`` and the
study's storage, which are private (``study._storage``, ``FrozenTrial._trial_id``): they are kept here, so an
Optuna release that moves them breaks one module. Every other module uses the public API (``ask``, ``tell``,
``enqueue_trial``, ``get_trials``, user attributes).
"""

from __future__ import annotations

from typing import Any

from ._plan import Plan, ignored, record_of, seed_of, values_of
from ._schedule import Trial
from ._storage import import_optuna


def snapshot(ft: Any, plan: Plan) -> Trial:
    """A stored trial (an ``optuna.trial.FrozenTrial``) as the schedule reads it."""
    planned = ft.user_attrs.get("planned")
    return Trial(
        number=ft.number, state=ft.state.name, values=values_of(ft, plan.keys), seed=seed_of(ft, plan),
        role=ft.user_attrs.get("role"), planned=int(planned) if isinstance(planned, int) else ft.number,
        ignored=ignored(ft), record=record_of(ft, plan),
        last_step=max(ft.intermediate_values) if ft.intermediate_values else None,
        driver=ft.user_attrs.get("driver"), dir=ft.user_attrs.get("dir"),
        started_at=ft.datetime_start.timestamp() if ft.datetime_start else None, handle=ft,
    )


def trials(study: Any, plan: Plan, finished: dict[int, Trial] | None = None) -> list[Trial]:
    """Every trial of the study as a snapshot. ``finished``: snapshots of finished trials kept between calls (a
    finished trial never changes: re-reading a long curve at every poll is what it saves)."""
    out = []
    for ft in study.get_trials(deepcopy=False):
        known = finished.get(ft.number) if finished is not None else None
        if known is None:
            known = snapshot(ft, plan)
            if finished is not None and known.finished:
                finished[ft.number] = known
        out.append(known)
    return out


def mark_interrupted(study: Any, trial: Trial, reason: str) -> None:
    """Fail a stored trial this driver did not ask for, marked interrupted (it no longer counts) with ``reason``."""
    optuna = import_optuna()
    handle = optuna.trial.Trial(study, trial.handle._trial_id)
    handle.set_user_attr("interrupted", True)
    handle.set_user_attr("reason", reason)
    study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)


def take_waiting(study: Any, trial: Trial) -> bool:
    """Move a WAITING trial to RUNNING so that no driver asks for it; False when another driver took it first."""
    optuna = import_optuna()
    return bool(study._storage.set_trial_state_values(trial.handle._trial_id, state=optuna.trial.TrialState.RUNNING))


def reread(study: Any, live: Any, plan: Plan) -> Trial:
    """The stored state of a trial this driver asked for (``live``: the ``optuna.trial.Trial`` ``ask`` gave)."""
    return snapshot(study._storage.get_trial(live._trial_id), plan)
