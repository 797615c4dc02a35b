"""Where a sweep's study lives, and how a second run of the same sweep finds it again.

The default is Optuna's JournalStorage with a file backend, ``<out>/study.journal``: an append-only log
that parallel trials and drivers on NFS can share (SQLite cannot: optuna#820, #815, PR #4034; see
``../shared/research/anchors.md`` §2.1). Any Optuna storage URL (``sqlite:///...``, ``mysql://...``,
``postgresql://...``) works too; a value without ``://`` is read as the path of a journal file.

The study remembers what it sweeps (its *fingerprint*: keys, values, objective, constraints, steps, seeds,
command). Resuming a study with a different fingerprint is refused, so the results of two different
sweeps are never mixed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from advisor.errors import SweepError

JOURNAL_NAME = "study.journal"
_FINGERPRINT_ATTR = "sweep"


def import_optuna() -> Any:
    try:
        import optuna
    except ImportError as err:
        raise SweepError("optuna is not installed; install verl-advisor[sweeps] to run sweeps") from err
    return optuna


def fingerprint_hash(fingerprint: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:10]


def storage_url(url: str | None, out: Path) -> str:
    """The storage a sweep uses, as a URL or journal path that ``optuna-dashboard`` also accepts."""
    if url is None:
        return str((out / JOURNAL_NAME).resolve())
    if "://" in url:
        return url
    return str(Path(url).expanduser().resolve())


def open_storage(url: str) -> Any:
    """An Optuna storage for :func:`storage_url`'s result.

    Raises:
        SweepError: the storage cannot be opened.
    """
    optuna = import_optuna()
    try:
        if "://" in url:
            return optuna.storages.get_storage(url)
        from optuna.storages.journal import JournalFileBackend

        Path(url).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(url))
    except (OSError, ValueError, ImportError) as err:
        raise SweepError(f"cannot open the Optuna storage ({type(err).__name__}: {err})",
                         path=url, suggestion="pass --storage with a journal file path or an Optuna storage URL") \
            from err
    except Exception as err:  # sqlalchemy raises its own errors for a bad URL or an unreachable server
        raise SweepError(f"cannot open the Optuna storage ({type(err).__name__}: {str(err).splitlines()[0]})",
                         path=url) from err


def dashboard_command(url: str) -> str:
    import shlex

    return f"optuna-dashboard {shlex.quote(url)}"


def load_or_create_study(storage: Any, name: str, direction: str, sampler: Any, pruner: Any,
                         fingerprint: dict[str, Any]) -> tuple[Any, bool]:
    """The study ``name``: created with ``fingerprint``, or loaded when it exists with the same one.

    Returns:
        (study, resumed): resumed is True when the study already existed.

    Raises:
        SweepError: a study of that name exists for a different sweep.
    """
    optuna = import_optuna()
    resumed = name in optuna.study.get_all_study_names(storage)
    study = optuna.create_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner,
                                direction=direction, load_if_exists=True)
    wanted = json.loads(json.dumps(fingerprint, default=str))
    stored = study.user_attrs.get(_FINGERPRINT_ATTR)
    if stored is None:
        study.set_user_attr(_FINGERPRINT_ATTR, wanted)
    elif stored != wanted:
        changed = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
        raise SweepError(f"study '{name}' was created for a different sweep (it differs in: {', '.join(changed)})",
                         suggestion="rerun with the original arguments to resume it, or pass another --study")
    if study.direction.name.lower() != direction:
        raise SweepError(f"study '{name}' {study.direction.name.lower()}s its objective; this sweep {direction}s it",
                         suggestion="pass another --study")
    return study, resumed
