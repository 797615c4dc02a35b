"""``advisor watch`` on a verl console log: a published verl 0.2 log (issue #38: `KeyError: 'timing/gen'`, exit 3,
where `suggest` reads the same log), the log alone (issue #40: the config from its start-up print), and an
internal error said on every channel the user chose (stderr, exit 3, the alert stream and --on-alert).

The log is verl's own published reference run (examples/published_log/SOURCE.md): its step 0 is two lines, the
validation score first, then the training metrics of the same step (verl 0.2's ``val_before_train``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import load_config
from advisor.errors import ConfigError
from advisor.metrics import load_metrics, parse_metrics_line
from advisor.playbook import suggest_run
from advisor.watch import Watcher, WatchOptions, config_of_log, watch

REPO = Path(__file__).resolve().parents[3]
LOG = REPO / "examples" / "published_log" / "gemma-2-2b-it-ppo.log"


def _decision(result) -> tuple:
    return (result.verdict, result.decided_by.id if result.decided_by else None,
            [c.override() for c in result.changes])


def _watch_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor", "watch", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_watch_reads_a_published_verl_02_log_as_suggest_does() -> None:
    cfg = load_config(LOG)
    watcher = Watcher(cfg, str(LOG), WatchOptions())
    records = [r for line in LOG.read_bytes().splitlines() if (r := parse_metrics_line(line, "console"))]
    steps = {step for step, _ in records}
    assert len(records) > len(steps)  # the shape of the crash: a step logged on two lines, new names on the second
    watcher.fmt = "console"
    watcher.feed(records)
    watcher.finish()
    # the last decision is suggest's on the whole file, renamed by the same alias table (timing/gen -> timing_s/gen)
    expected = suggest_run(cfg, LOG)
    assert _decision(watcher.decision) == _decision(expected)
    from advisor.metrics import frame_from_rows

    live = frame_from_rows(*watcher.frame.arrays(), fmt="console", path=str(LOG))
    assert dict(live.aliases) == dict(load_metrics(LOG).aliases) and live.aliases["timing/gen"] == "timing_s/gen"


def test_watch_log_alone_takes_the_config_the_log_printed() -> None:
    done = _watch_cli(str(LOG), "--idle-stop", "0.01", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert f"stopped after {len({s for s, _ in _records()})} steps" in done.stderr
    # the same with an override after the log, as `suggest LOG key=value` takes it
    done = _watch_cli(str(LOG), "trainer.total_epochs=2", "--idle-stop", "0.01")
    assert done.returncode == 0, done.stderr


def _records() -> list:
    return [r for line in LOG.read_bytes().splitlines() if (r := parse_metrics_line(line, "console"))]


def test_watch_log_alone_waits_for_the_start_up_print_of_a_growing_log(tmp_path: Path) -> None:
    lines = LOG.read_text().splitlines(keepends=True)
    first_step = next(i for i, line in enumerate(lines) if "step:0" in line)
    log = tmp_path / "run.log"
    stages = [[], lines[:5], lines[:first_step]]  # the log appears, its header (no command yet), its head
    polls: list[int] = []

    def grow(_: float) -> None:
        log.write_text("".join(stages[min(len(polls), len(stages) - 1)]))
        polls.append(1)

    cfg = config_of_log(log, sleep=grow, poll_s=0)
    assert len(polls) == 3  # waited while the file was missing, empty and without the launch trace
    assert cfg.to_yaml() == load_config(LOG).to_yaml()


def test_watch_log_alone_fails_once_a_step_came_with_no_config(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("starting\nstep:1 - critic/score/mean:0.5 - actor/pg_loss:0.1\n")
    with pytest.raises(ConfigError):
        config_of_log(log, sleep=lambda _: pytest.fail("waited for a config that comes before step 1"))
    missing = tmp_path / "never.log"
    ticks = iter(range(1000))
    with pytest.raises(ConfigError, match="no config printed"):
        config_of_log(missing, idle_stop_minutes=0.05, clock=lambda: next(ticks), sleep=lambda _: None)


class _Boom(RuntimeError):
    pass


def test_an_internal_error_is_said_on_stdout_on_alert_and_stderr_with_exit_3(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    from advisor.cli import main
    from advisor.watch import _watch

    def broken(self) -> list:
        raise _Boom("a bug")

    monkeypatch.setattr(_watch.Watcher, "evaluate", broken)
    received = tmp_path / "received.json"
    hook = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\").write(sys.stdin.read())' {received}"
    monkeypatch.setattr(sys, "argv", ["advisor", "watch", str(LOG), "--idle-stop", "0.01", "--format", "json",
                                      "--on-alert", hook])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 3  # README: 3 is an internal error of the advisor
    out, err = capsys.readouterr()
    event = json.loads(out.splitlines()[-1])
    assert event["event"] == "error" and "_Boom: a bug" in event["error"] and event["severity"] == "error"
    assert json.loads(received.read_text()) == event  # the --on-alert channel got it too
    assert "internal error" in err and "_Boom" in err


def test_an_internal_error_in_text_format_is_a_line_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from io import StringIO

    from advisor.watch import _watch

    monkeypatch.setattr(_watch.Watcher, "evaluate", lambda self: (_ for _ in ()).throw(_Boom("a bug")))
    out = StringIO()
    with pytest.raises(_Boom):
        watch(load_config(LOG), str(LOG), WatchOptions(idle_stop_minutes=0.0), out=out, err=StringIO())
    assert out.getvalue().startswith("step ") and "ERROR advisor watch stopped on an internal error" in out.getvalue()
