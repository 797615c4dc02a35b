"""Follow a Ray job's driver log through Ray's job submission client (``ray://JOB_ID``).

``JobSubmissionClient.tail_job_logs`` streams the job's stdout as verl's console logger prints it
(``step:N - key:value ...``); it ends when the job does. Ray is imported here only, so ``advisor watch``
on a file never loads it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from advisor.errors import MetricsError, install_hint

from ._sources import LineSource, Record, TextStream


class RayJobSource:
    def __init__(self, job_id: str, address: str) -> None:
        try:
            from ray.job_submission import JobSubmissionClient
        except ImportError as err:
            raise MetricsError("following a Ray job needs Ray", path=f"ray://{job_id}",
                               suggestion=install_hint("ray")) from err
        self.name = f"ray://{job_id}"
        try:
            self.client: Any = JobSubmissionClient(address)
            self.client.get_job_info(job_id)
        except Exception as err:  # unreachable address, no such job: the input's problem
            detail = " ".join(str(err).split())[:160]
            raise MetricsError(f"cannot follow the job at {address} ({detail})", path=self.name,
                               suggestion="check --address (the job server, http://HEAD:8265) and the job id "
                                          "(ray job list)") from err
        self.job_id = job_id
        self.stream = TextStream()
        self.lines = LineSource(self.stream, name=self.name, fmt="console")
        self.fmt: str | None = "console"
        self.ended = False
        self._thread = threading.Thread(target=self._follow, name=f"watch-{job_id}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        async def follow() -> None:
            async for chunk in self.client.tail_job_logs(self.job_id):
                self.stream.push(chunk)

        try:
            asyncio.run(follow())
        except Exception as err:  # a dropped stream ends the watch; the job itself is not touched
            self.stream.error = " ".join(str(err).split())[:160]
        finally:
            self.stream.push(None)

    def poll(self) -> list[Record]:
        records = self.lines.poll()
        self.ended = self.stream.ended
        return records

    def close(self) -> list[Record]:
        return self.lines.close()
