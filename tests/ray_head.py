"""A real local Ray head on loopback for the tests marked ``@pytest.mark.ray``: import ``ray_address`` into a
test module (``from ray_head import ray_address``) and each such module gets its own head.

The head runs with 2 CPUs, in its own temp dir and process group, every default port moved so another Ray on
the machine does not clash; teardown sends SIGINT to ``ray start --block``, which stops what it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    ray_cli = shutil.which("ray")
    if ray_cli is None:
        pytest.skip("the ray command is not on PATH")
    temp = Path(tempfile.mkdtemp(prefix="ray-"))
    port, dashboard, client, agent = _free_port(), _free_port(), _free_port(), _free_port()
    head = subprocess.Popen(  # every fixed default port moved, so another Ray on this machine does not clash
        [ray_cli, "start", "--head", "--block", "--port", str(port), "--node-ip-address", "127.0.0.1",
         "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), "--ray-client-server-port", str(client),
         "--dashboard-agent-listen-port", str(agent), "--num-cpus", "2", "--temp-dir", str(temp),
         "--include-dashboard", "true", "--disable-usage-stats"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    address = f"http://127.0.0.1:{dashboard}"
    try:
        from ray.job_submission import JobSubmissionClient

        deadline = time.monotonic() + 60
        while True:
            if head.poll() is not None:
                pytest.skip(f"ray start exited with {head.returncode}")
            try:
                JobSubmissionClient(address).list_jobs()
                break
            except Exception:  # not up yet
                if time.monotonic() > deadline:
                    pytest.skip("the local Ray head did not come up within 60 s")
                time.sleep(0.5)
        yield address
    finally:
        try:
            os.killpg(head.pid, signal.SIGINT)
            head.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)
