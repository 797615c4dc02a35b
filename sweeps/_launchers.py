"""Where trials run: a local subprocess per trial, or a Ray Job per trial on an existing Ray cluster.

Neither nests inside verl's own Ray: a trial is a whole training command. Locally it runs in its own
session and process group (``start_new_session``), so stopping it stops everything it started there. A
process that leaves the group (``setsid``, a daemonising double fork: Ray's own ``ray start`` does) still
carries the trial's environment, and with it ``ADVISOR_TRIAL_TOKEN``, a random token per trial: when the
trial ends or is stopped, every process of this user whose environment holds the token is stopped too (read
from ``/proc/<pid>/environ`` on Linux). That is the cgroup's job done without one (a cgroup needs systemd
or root), and unlike a child subreaper it does not make the driver the parent, and reaper, of every orphan
its process tree leaves. On Ray it is submitted
with :class:`ray.job_submission.JobSubmissionClient`; its logs are streamed into the trial's
``stdout.log`` (the metrics are read from verl's console lines there) and pruning calls ``stop_job``.

A Ray trial runs with ``RAY_ADDRESS`` removed from its environment: Ray's job supervisor sets it to the
cluster, and verl's ``ray.init()`` would then join the cluster and ask for GPUs that the job's entrypoint
already holds. Without it, each trial starts its own Ray runtime on the node and GPUs
(``entrypoint_num_gpus``) its job was given, so a trial must fit on one node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from advisor.errors import SweepError

from ._liveness import pid_alive, process_start_ticks
from ._trial import TrialCommand

STOP_GRACE_S = 10.0
"""seconds between SIGTERM and SIGKILL when a trial is stopped"""
TOKEN_ENV = "ADVISOR_TRIAL_TOKEN"
"""environment variable whose value marks every process a local trial started, wherever it moved"""


class RunningTrial(Protocol):
    """A started trial."""

    def poll(self) -> int | None:
        """The exit code once the trial has ended, else None."""

    def stop(self) -> None:
        """Stop the trial and everything it started (returns once it is stopped)."""

    def handle(self) -> dict[str, Any]:
        """What :func:`stop_orphan` needs to find and stop this trial from another process."""


class Launcher(Protocol):
    """Starts trials. ``console_metrics`` says whether their metrics come from the console stream."""

    name: str
    console_metrics: bool

    def start(self, cmd: TrialCommand, name: str) -> RunningTrial: ...

    def describe(self) -> dict[str, Any]: ...


# ---------------------------------------------------------------------------------------------------------------
# local subprocesses


def marked_processes(token: str) -> list[int]:
    """The processes of this user whose environment holds ``ADVISOR_TRIAL_TOKEN=token`` (Linux; else none)."""
    needle = f"{TOKEN_ENV}={token}".encode() + b"\0"
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fp:
                environ = fp.read(1 << 20)
        except OSError:  # another user's process, or gone
            continue
        if needle in environ or environ.endswith(needle[:-1]):
            found.append(int(entry))
    return found


def _signal(pgid: int, pids: list[int], sig: int) -> bool:
    """Send ``sig`` to the process group and to ``pids``; True when one of them was there."""
    alive = False
    if pgid > 1:  # never killpg(1) or below: that is init, or every process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
            alive = True
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            alive = True
    return alive


def _signal_all(pgid: int, token: str | None, sig: int) -> bool:
    """Send ``sig`` to the group and to the processes marked with ``token``; True when one was there."""
    return _signal(pgid, marked_processes(token) if token else [], sig)


def _kill_group(pgid: int, grace_s: float, leader: subprocess.Popen[bytes] | None = None,
                token: str | None = None) -> None:
    """SIGTERM the process group (and the processes marked with ``token`` that left it), SIGKILL what is left
    after ``grace_s``."""
    strays = marked_processes(token) if token else []  # /proc is read once here and once at the end
    if not _signal(pgid, strays, signal.SIGTERM):
        return
    _signal(pgid, strays, signal.SIGCONT)  # a stopped (SIGSTOP) trial handles its SIGTERM only once resumed
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()  # reap it: a zombie leader still counts as a member of its group
        if not _signal(pgid, strays, 0):
            break
        time.sleep(0.05)
    late = marked_processes(token) if token else []  # forked during the grace period
    _signal(pgid, sorted({*strays, *late}), signal.SIGKILL)


class LocalTrial:
    def __init__(self, proc: subprocess.Popen[bytes], files: list[Any], grace_s: float, token: str | None = None
                 ) -> None:
        self.proc = proc
        self.start_ticks = process_start_ticks(proc.pid)
        self.token = token
        self._files = files
        self._grace_s = grace_s

    def poll(self) -> int | None:
        code = self.proc.poll()
        if code is not None:
            self._cleanup()
        return code

    def stop(self) -> None:
        _kill_group(self.proc.pid, self._grace_s, self.proc, self.token)
        self.proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        # whatever the trial left behind (a verl run's local Ray, in its group or started with setsid) goes with it
        if self._files or self.token:
            _signal_all(self.proc.pid, self.token, signal.SIGKILL)
        for fp in self._files:
            fp.close()
        self._files = []
        self.token = None  # once is enough: a later poll() need not scan /proc again

    def handle(self) -> dict[str, Any]:
        return {"launcher": "local", "pid": self.proc.pid, "pgid": self.proc.pid, "start_ticks": self.start_ticks,
                **({"token": self.token} if self.token else {})}


class LocalLauncher:
    """Runs each trial as a local subprocess in its own process group.

    Args:
        stop_grace_s: seconds between SIGTERM and SIGKILL when a trial is stopped.
    """

    name = "local"
    console_metrics = False

    def __init__(self, stop_grace_s: float = STOP_GRACE_S) -> None:
        self.stop_grace_s = stop_grace_s

    def start(self, cmd: TrialCommand, name: str) -> LocalTrial:
        cmd.cwd.mkdir(parents=True, exist_ok=True)
        stdout = cmd.stdout_path.open("wb")
        stderr = cmd.stderr_path.open("wb")
        token = uuid.uuid4().hex
        try:
            proc = subprocess.Popen(cmd.argv, cwd=cmd.cwd, env={**os.environ, **cmd.env, TOKEN_ENV: token},
                                    stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as err:
            stdout.close()
            stderr.close()
            raise SweepError(f"cannot start the trial command '{cmd.argv[0]}' ({err.strerror})",
                             suggestion="check --command") from err
        return LocalTrial(proc, [stdout, stderr], self.stop_grace_s, token)

    def describe(self) -> dict[str, Any]:
        return {"launcher": "local"}


# ---------------------------------------------------------------------------------------------------------------
# Ray Jobs


def _job_client(address: str) -> Any:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as err:
        raise SweepError("ray is not installed; install verl-advisor[ray] to run trials as Ray Jobs") from err
    try:
        return JobSubmissionClient(address)
    except Exception as err:  # ray raises ConnectionError, RuntimeError or ValueError here
        raise SweepError(f"cannot reach the Ray job server at {address} ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})",
                         suggestion="pass --address http://HEAD:8265 of a running Ray cluster") from err


class RayJobTrial:
    def __init__(self, client: Any, address: str, job_id: str, log_path: Path) -> None:
        self.client = client
        self.address = address
        self.job_id = job_id
        self.log_path = log_path
        self._done = threading.Event()
        self._streamer = threading.Thread(target=self._stream, name=f"logs-{job_id}", daemon=True)
        self._streamer.start()
        self._code: int | None = None

    def _stream(self) -> None:
        async def follow() -> None:
            with self.log_path.open("ab") as fp:
                async for chunk in self.client.tail_job_logs(self.job_id):
                    fp.write(chunk.encode("utf-8", errors="replace"))
                    fp.flush()

        try:
            asyncio.run(follow())
        except Exception:  # a dropped stream: the final logs are fetched when the job ends
            pass
        finally:
            self._done.set()

    def _finish(self, code: int) -> int:
        self._done.wait(timeout=10)
        try:  # the stream may have dropped: the job server keeps the whole log
            full = self.client.get_job_logs(self.job_id).encode("utf-8", errors="replace")
        except Exception:
            full = b""
        if len(full) > self.log_path.stat().st_size:
            self.log_path.write_bytes(full)
        self._code = code
        return code

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        from ray.job_submission import JobStatus

        info = self.client.get_job_info(self.job_id)
        if not info.status.is_terminal():
            return None
        if info.status == JobStatus.SUCCEEDED:
            return self._finish(0)
        if info.status == JobStatus.STOPPED:
            return self._finish(-signal.SIGTERM)
        code = getattr(info, "driver_exit_code", None)
        return self._finish(code if isinstance(code, int) and code != 0 else 1)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop_job(self.job_id)
        deadline = time.monotonic() + STOP_GRACE_S + 20
        while time.monotonic() < deadline and self.poll() is None:
            time.sleep(0.2)

    def handle(self) -> dict[str, Any]:
        return {"launcher": "ray", "address": self.address, "submission_id": self.job_id}


class RayJobLauncher:
    """Submits each trial as a Ray Job to an existing cluster.

    Args:
        address: the Ray dashboard / job server, e.g. ``http://127.0.0.1:8265``.
        gpus_per_trial: ``entrypoint_num_gpus`` of each job (0 for CPU-only trials).
        cpus_per_trial: ``entrypoint_num_cpus`` of each job.
    """

    name = "ray"
    console_metrics = True

    def __init__(self, address: str, gpus_per_trial: float = 0, cpus_per_trial: float = 0) -> None:
        if gpus_per_trial < 0 or cpus_per_trial < 0:
            raise SweepError("--gpus-per-trial must be at least 0")
        self.address = address
        self.gpus_per_trial = gpus_per_trial
        self.cpus_per_trial = cpus_per_trial
        self.client = _job_client(address)

    def start(self, cmd: TrialCommand, name: str) -> RayJobTrial:
        cmd.cwd.mkdir(parents=True, exist_ok=True)
        cmd.stdout_path.write_bytes(b"")
        cmd.stderr_path.write_bytes(b"")
        # Ray runs the entrypoint through a shell: each item is quoted, nothing is interpolated
        entrypoint = (f"mkdir -p {shlex.quote(str(cmd.cwd))} && cd {shlex.quote(str(cmd.cwd))} && "
                      f"exec env -u RAY_ADDRESS {shlex.join(cmd.argv)}")
        job_id = f"{name}-{uuid.uuid4().hex[:8]}"
        kwargs: dict[str, Any] = {}
        if self.gpus_per_trial:
            kwargs["entrypoint_num_gpus"] = self.gpus_per_trial
        if self.cpus_per_trial:
            kwargs["entrypoint_num_cpus"] = self.cpus_per_trial
        try:
            self.client.submit_job(entrypoint=entrypoint, submission_id=job_id,
                                   runtime_env={"env_vars": dict(cmd.env)}, **kwargs)
        except Exception as err:  # ray raises RuntimeError with the server's message
            raise SweepError(f"Ray at {self.address} refused the trial job ({str(err).splitlines()[0]})") from err
        return RayJobTrial(self.client, self.address, job_id, cmd.stdout_path)

    def describe(self) -> dict[str, Any]:
        return {"launcher": "ray", "address": self.address, "gpus_per_trial": self.gpus_per_trial}


# ---------------------------------------------------------------------------------------------------------------


def stop_orphan(handle: dict[str, Any], grace_s: float = STOP_GRACE_S) -> bool:
    """Stop the process or job of a trial whose driver died; True when something was stopped."""
    if handle.get("launcher") == "local":
        pid, ticks, token = handle.get("pid"), handle.get("start_ticks"), handle.get("token")
        token = token if isinstance(token, str) and token.isalnum() else None
        if not isinstance(pid, int):
            return False
        if not pid_alive(pid, ticks):  # the trial's own process is gone: what it started elsewhere may not be
            strays = marked_processes(token) if token else []
            for stray in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(stray, signal.SIGKILL)
            return bool(strays)
        _kill_group(int(handle.get("pgid", pid)), grace_s, token=token)
        return True
    if handle.get("launcher") == "ray":
        try:
            client = _job_client(str(handle["address"]))
            return bool(client.stop_job(str(handle["submission_id"])))
        except (SweepError, KeyError):
            return False
        except Exception:  # the job is already gone
            return False
    return False
