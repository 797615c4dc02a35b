"""The sweep driver survives its trials, and keeps secrets out of everything it stores, prints or launches.

A hostile trainer (the sandbox, plus garbage appended to its metrics file after each step) must not crash the
driver nor flip its verdict; an environment value named by ``${oc.env:...}`` must not reach a trial's argv, the
study journal, sweep.json, cmd.json or the driver's output.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from sweeps import Objective, Param, SweepSpec, run_sweep  # noqa: E402
from sweeps._tail import MetricsTail  # noqa: E402

LR = "actor_rollout_ref.actor.optim.lr"
SCORE = "critic/score/mean"
SMALL = [
    "data.train_batch_size=64",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "data.max_response_length=32",
    "trainer.n_gpus_per_node=2",
    "+sandbox.train_size=1024",
    "trainer.val_before_train=false",
    "trainer.logger=[console]",
    "+sandbox.deterministic_timing=true",
]

# After each real step the trainer appends, to the metrics file the driver tails: a line of 1,000 '[', bytes that
# are not UTF-8, a step far past the trial's steps and a step going back, both with a score no real step has, a
# 2 MiB line, a 5,000-digit number and a deep object.
HOSTILE_TRAINER = """
import sys
from sweeps.sandbox import loggers, main
log = loggers.Tracking.log
def hostile_log(self, data, step):
    log(self, data, step)
    fh = self.fp.buffer  # the logger's own file, so its next line follows the garbage
    fh.write(b"[" * 1000 + b"\\n")
    fh.write(b'{"step": 3, "data": {"critic/score/\\xff": 1.0}}\\n')
    fh.write(b'{"step": 99999999999999999999, "data": {"critic/score/mean": 1e308}}\\n')
    if step > 2:
        fh.write(b'{"step": 1, "data": {"critic/score/mean": 1e308}}\\n')
    fh.write(b'{"step": ' + b"9" * 5000 + b', "data": {}}\\n')
    fh.write(b'{"a": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001 + b"\\n")
    fh.write(b"x" * (2 << 20) + b"\\n")
    fh.flush()
loggers.Tracking.log = hostile_log
sys.argv = ["sweeps.sandbox", *sys.argv[1:]]
sys.exit(main())
"""


def _script(directory: Path, *extra: str) -> Path:
    path = directory / "run.sh"
    path.write_text("#!/usr/bin/env bash\nset -euo pipefail\npython3 -m verl.trainer.main_ppo \\\n    "
                    + " \\\n    ".join(shlex.quote(a) for a in [*SMALL, *extra]) + " \"$@\"\n")
    return path


def test_a_hostile_trainer_is_its_own_problem_and_the_sweep_finishes_with_the_verdict(tmp_path: Path) -> None:
    trainer = tmp_path / "hostile_trainer.py"
    trainer.write_text(HOSTILE_TRAINER)
    script = _script(tmp_path, f"{LR}=1e-3")  # the lr fault test_sweep_runner.py confirms on a clean trainer
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=10, seeds=3, prune=False)
    result = run_sweep(script, spec, command=[sys.executable, str(trainer)], out=tmp_path / "out", parallel=2)

    assert result.verdict.decision == "fix confirmed" and result.verdict.candidate == {LR: 1e-5}
    for trial in result.trials:
        assert trial.state == "complete" and trial.steps == 10
        assert trial.objective is not None and trial.objective < 1.0  # never the 1e308 of the hostile lines


def test_the_tail_skips_what_no_real_step_is(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [b'{"step": 1, "data": {"s": 0.1}}', b"[" * 1000, b'{"step": 99999999999999999999, "data": {"s": 9}}',
             b'{"step": 2, "data": {"s": 0.2}}', b'{"step": 1, "data": {"s": 9}}', b"x" * (2 << 20),
             b'{"step": -1, "data": {"s": 9}}', b'{"step": 3, "data": {"s": 1e999}}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    tail = MetricsTail(path, "jsonl", ["s"], max_step=10)
    assert tail.poll()
    assert tail.values("s") == [0.1, 0.2, None] and tail.last_step == 3
    assert tail.skipped == 4  # step past 10, step going back, the 2 MiB line, step -1


def test_console_steps_past_int64_are_not_steps(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_text("step:1 - s:0.5\nstep:" + "9" * 5000 + " - s:9\nstep:2 - s:0.25\n")
    tail = MetricsTail(path, "console", ["s"], max_step=10)
    tail.poll()
    assert tail.values("s") == [0.5, 0.25]


def test_no_environment_value_reaches_a_trial_storage_or_output(tmp_path: Path, monkeypatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    canary = "canary-7f3a9c1e-do-not-leak"
    monkeypatch.setenv("ADVISOR_TEST_CANARY", canary)
    script = _script(tmp_path, f"{LR}=1e-5", "trainer.experiment_name=${oc.env:ADVISOR_TEST_CANARY}",
                     "trainer.project_name=p_${oc.env:ADVISOR_TEST_CANARY}")
    from advisor.cli import main

    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["advisor", "sweep", str(script), "--param", LR, "--values", "1e-4", "--steps",
                                      "3", "--objective", SCORE, "--seeds", "1", "--no-prune",
                                      "--command", f"{sys.executable} -m sweeps.sandbox", "--out", str(out)])
    with pytest.raises(SystemExit) as exit_:
        main()
    stdout, stderr = capsys.readouterr()
    assert exit_.value.code in (0, 1), stderr
    assert canary not in stdout + stderr
    cmds = sorted(out.rglob("cmd.json"))
    assert cmds
    for cmd in cmds:
        argv = json.loads(cmd.read_text())["argv"]
        # the value passes to the trial as the user wrote it (the trial's own Hydra resolves it, as verl would)
        assert any("${oc.env:ADVISOR_TEST_CANARY}" in a for a in argv), argv
    for stored in [*out.rglob("*.json"), *out.rglob("*.journal")]:
        assert canary not in stored.read_text(errors="replace"), stored


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/b", ".hidden", "x" * 101])
def test_a_study_name_is_confined_to_the_sweep_directory(name: str, tmp_path: Path, monkeypatch) -> None:
    from advisor.errors import SweepError

    monkeypatch.chdir(tmp_path)
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=3, seeds=1)
    with pytest.raises(SweepError, match="a study name is one folder name"):
        run_sweep(_script(tmp_path), spec, command=[sys.executable, "-m", "sweeps.sandbox"], study_name=name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]  # nothing written, here or above


@pytest.mark.parametrize("name", ["../../x", "/tmp/x"])
def test_cli_study_outside_the_sweep_directory_is_one_line_and_exit_2(name: str, tmp_path: Path, monkeypatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from advisor.cli import main

    monkeypatch.chdir(tmp_path)
    script = _script(tmp_path)
    monkeypatch.setattr(sys, "argv", ["advisor", "sweep", str(script), "--param", LR, "--values", "1e-4", "--steps",
                                      "3", "--objective", SCORE, "--seeds", "1", "--study", name,
                                      "--command", f"{sys.executable} -m sweeps.sandbox"])
    with pytest.raises(SystemExit) as exit_:
        main()
    _, err = capsys.readouterr()
    assert exit_.value.code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "a study name is one folder name" in lines[0] and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]
