"""Storage and liveness: the default journal, refusing a different sweep, and telling orphans from live trials."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.errors import SweepError
from sweeps._launchers import stop_orphan
from sweeps._liveness import DriverIdentity, Lease, is_orphaned, pid_alive, process_start_ticks

optuna = pytest.importorskip("optuna")

from sweeps._storage import dashboard_command, load_or_create_study, open_storage, storage_url  # noqa: E402


def test_default_storage_is_a_journal_file_in_the_sweep_directory(tmp_path: Path) -> None:
    url = storage_url(None, tmp_path)
    assert url == str((tmp_path / "study.journal").resolve())
    assert dashboard_command(url) == f"optuna-dashboard {url}"
    assert storage_url("sqlite:///x.db", tmp_path) == "sqlite:///x.db"
    assert storage_url("rel/j.log", tmp_path) == str(Path("rel/j.log").resolve())


def test_resuming_a_study_checks_its_fingerprint(tmp_path: Path) -> None:
    storage = open_storage(storage_url(None, tmp_path))
    sampler, pruner = optuna.samplers.RandomSampler(), optuna.pruners.NopPruner()
    study, resumed = load_or_create_study(storage, "s", "maximize", sampler, pruner, {"steps": 10, "seeds": [1]})
    assert resumed is False and study.user_attrs["sweep"] == {"steps": 10, "seeds": [1]}
    again, resumed = load_or_create_study(open_storage(storage_url(None, tmp_path)), "s", "maximize", sampler,
                                          pruner, {"steps": 10, "seeds": [1]})
    assert resumed is True and again.study_name == "s"
    with pytest.raises(SweepError, match=r"created for a different sweep \(it differs in: steps\)"):
        load_or_create_study(storage, "s", "maximize", sampler, pruner, {"steps": 20, "seeds": [1]})
    with pytest.raises(SweepError, match="maximizes its objective; this sweep minimizes it"):
        load_or_create_study(storage, "s", "minimize", sampler, pruner, {"steps": 10, "seeds": [1]})


def test_an_unreadable_storage_url_is_a_sweep_error() -> None:
    with pytest.raises(SweepError, match="cannot open the Optuna storage"):
        open_storage("nosuchdialect://x")


def test_pid_alive_tells_a_recycled_pid_by_its_start_time() -> None:
    me = os.getpid()
    assert pid_alive(me, process_start_ticks(me))
    if process_start_ticks(me) is not None:
        assert not pid_alive(me, (process_start_ticks(me) or 0) + 1)


def test_orphaned_when_the_driver_on_this_host_is_dead(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = DriverIdentity(socket.gethostname(), proc.pid, 1).to_dict()
    assert is_orphaned(dead, None, started_s_ago=1.0)
    assert not is_orphaned(DriverIdentity.current().to_dict(), None, started_s_ago=1.0)


def test_a_driver_on_another_host_is_judged_by_its_lease(tmp_path: Path) -> None:
    other = DriverIdentity("another-host-" + socket.gethostname(), 1, None).to_dict()
    lease = Lease(tmp_path)
    lease.write(DriverIdentity.current(), {"launcher": "local", "pid": 1})
    assert not is_orphaned(other, lease, started_s_ago=1.0, stale_after_s=60)
    old = time.time() - 120
    os.utime(lease.path, (old, old))
    assert is_orphaned(other, lease, started_s_ago=130.0, stale_after_s=60)
    lease.refresh()
    assert not is_orphaned(other, lease, started_s_ago=130.0, stale_after_s=60)
    assert lease.read() == {"driver": DriverIdentity.current().to_dict(), "handle": {"launcher": "local", "pid": 1}}


def test_a_trial_without_a_driver_is_orphaned_when_the_study_s_other_drivers_are_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = DriverIdentity(socket.gethostname(), proc.pid, 1).to_dict()
    elsewhere = DriverIdentity("another-host-" + socket.gethostname(), 1, None).to_dict()
    assert is_orphaned(None, None, started_s_ago=5.0, stale_after_s=60, other_drivers=[dead])
    assert not is_orphaned(None, None, started_s_ago=5.0, stale_after_s=60,
                           other_drivers=[dead, DriverIdentity.current().to_dict()])
    assert not is_orphaned(None, None, started_s_ago=5.0, stale_after_s=60, other_drivers=[elsewhere])
    assert is_orphaned(None, None, started_s_ago=61.0, stale_after_s=60, other_drivers=[elsewhere])


def test_stop_orphan_stops_a_process_group_it_can_prove_is_the_trial() -> None:
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    handle = {"launcher": "local", "pid": proc.pid, "pgid": proc.pid, "start_ticks": process_start_ticks(proc.pid)}
    assert stop_orphan({**handle, "start_ticks": (handle["start_ticks"] or 0) + 1}, grace_s=1) is False  # not it
    assert proc.poll() is None
    assert stop_orphan(handle, grace_s=1) is True
    assert proc.wait(timeout=5) == -15
    assert stop_orphan(handle, grace_s=1) is False  # gone already
    assert stop_orphan({"launcher": "ray", "address": "http://127.0.0.1:9", "submission_id": "x"}) is False
