"""`advisor verify` on the CPU sandbox: does it confirm fixes that help, keep healthy runs, and how long does it take?

    python bench/bench_verify.py [--policy lm|loglinear] [--steps 30] [--parallel 2] [--skip-examples]
                                 [--skip-corpus] [--full-corpus] [--only NAME ...] [-v]

Every sandbox run uses ``+sandbox.policy`` (default ``lm``, the language-model policy; ``loglinear`` the fast
19-token one the corpus was first measured on).

**Subset on the language model.** With ``--policy lm`` the corpus part runs LM_SUBSET unless ``--full-corpus`` or
``--only`` is given: four faults (lr too high, responses too short, sampling temperature too low, entropy bonus too
large: the clipfrac, response-length, advantage and entropy trees) and four healthy runs with a harmful named
change (temperature 0.1, max_response_length 3, entropy_coeff 0.5 on PPO, an in-reward kl_coef of 3). On the LM a
corpus case takes about 5 minutes on 2 cores (the faulty and the fixed run plus verify's 8-9 trials of --steps),
so the full corpus (24 cases, 10 of them healthy) would take about 2 hours.

**Examples.** `advisor verify examples/<name>/run.sh examples/<name>/metrics.jsonl --command 'python -m
sweeps.sandbox +sandbox.policy=POLICY' --steps 30 --parallel 2` (the CLI, as a user runs it) for grpo_flat_groups
and lr_too_high; prints the verdict, verify's wall time and the sum of its trials' own training time (the
sandbox's ``timing_s/step`` plus ``timing_s/testing`` of every step logged). On the language model the examples
run at the corpus's size (EXAMPLE_BENCH_SIZE, given to verify as KEY=VALUE overrides: 128 prompts, 4 mini-batches,
32-token responses) unless ``--examples-own-size``: at their own 7B-run size (512 prompts x 5, 1,024-token
responses) one LM step takes 6 s at temperature 1 and 30 s at the third value 1.2 (the LM rambles to the length
limit), and grpo_flat_groups' verify had not finished after 20 minutes.

**Corpus.** A representative subset of the scenario corpus of ``bench/bench_suggest_corpus.py`` (its faults,
modes, healthy variations and MIN_HARM), chosen to run in about 15 minutes on a loaded 2-core machine: seed 1,
one mode per fault (the first of its modes that the fault applies to: GRPO with loss-side KL, GRPO with
reward-side KL for the in-reward KL, PPO for the critic lr), its first severity that hurts, at --steps.

- *faults*: the faulty run is made, ``advisor suggest`` reads it; a case counts only when the fix is known to
  help: suggest changes one key, and the fixed run's held-out validation (``final_validation``: mean of the last
  two ``val-core/*``) beats the faulty run's on the same seed. Then ``verify`` sweeps it; right when the
  verdict is **fix confirmed** or **a different value is better** (a value other than the baseline is
  confirmed, in the proposal's direction). Printed as ``verify: fix confirmed N/M``.
- *reproduction*: for each fault case kept, whether the baseline's trials showed the diagnosis suggest made on
  the faulty run (``sweeps/verify/_reproduce.py``); printed as
  ``verify: diagnosis shown on the baseline's trials N/M faults``.
- *healthy*: a healthy run of the corpus with a named change (``--propose``) that the corpus injects as a
  fault, kept only when it is measured to lower validation by MIN_HARM on that run (so "keep" is the truth);
  right when the verdict keeps the baseline (**keep baseline** or **insufficient evidence**: no change is
  recommended), or names a different value (the third) that is then measured better than the baseline on two
  fresh seeds (HOLDOUT_SEEDS, not among verify's): a true finding, not a false alarm. Never right when the
  harmful change is confirmed. Printed as ``verify: healthy kept N/M``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "scenarios"))

from bench_suggest_corpus import COMMON, FAULTS, MIN_HARM, MODES, final_validation  # noqa: E402

EXAMPLES = ("grpo_flat_groups", "lr_too_high")
PERF = ["--skip-tree", "throughput", "--skip-tree", "memory"]  # the sandbox's timings are a CPU's
FIRST_MODE = {"reward_kl_too_strong": ("grpo", "reward"), "critic_lr_too_low": ("ppo", "none")}
# named changes on healthy runs: faults the corpus injects (each kept only where it is measured to hurt)
HOLDOUT_SEEDS = (101, 102)
# the examples on the language model: the corpus's batch layout and response length (4 mini-batches a step, as the
# examples' 512 / 128, so the PPO ratio still moves within a step)
EXAMPLE_BENCH_SIZE = ("data.train_batch_size=128", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "data.max_response_length=32")
# the corpus cases run on the language model by default (case names containing one of these): see the docstring
LM_SUBSET = ("lr_too_high@", "response_too_short@", "temperature_too_low@", "entropy_bonus_too_large@",
             "healthy grpo/loss --propose actor_rollout_ref.rollout.temperature=0.1",
             "healthy grpo/loss --propose data.max_response_length=3",
             "healthy ppo/none --propose actor_rollout_ref.actor.entropy_coeff=0.5",
             "healthy grpo/reward --propose algorithm.kl_ctrl.kl_coef=3.0")
HEALTHY_PROPOSALS = (
    (("grpo", "loss"), "actor_rollout_ref.actor.entropy_coeff=0.5"),
    (("grpo", "loss"), "actor_rollout_ref.rollout.temperature=0.1"),
    (("grpo", "loss"), "data.max_response_length=3"),
    (("ppo", "none"), "actor_rollout_ref.actor.entropy_coeff=0.5"),
    (("ppo", "none"), "data.max_response_length=3"),
    (("rloo", "loss"), "actor_rollout_ref.actor.entropy_coeff=0.5"),
    (("rloo", "loss"), "actor_rollout_ref.rollout.temperature=0.1"),
    (("grpo", "reward"), "algorithm.kl_ctrl.kl_coef=3.0"),
    (("dapo", "none"), "data.max_response_length=3"),
    (("dapo", "none"), "actor_rollout_ref.rollout.temperature=0.05"),
)


def trial_overhead(out: Path) -> float:
    """Mean seconds a trial took beyond its own training: from its command file to its result file, less the
    steps and validations it logged (interpreter start, imports, data and model set-up, the driver's polling)."""
    gaps = []
    for cmd_file in sorted((out / "trials").glob("*/cmd.json")):
        result = cmd_file.parent / "result.json"
        if result.is_file():
            own, _, _ = trial_seconds(out, cmd_file.parent.name)
            gaps.append(result.stat().st_mtime - cmd_file.stat().st_mtime - own)
    return sum(gaps) / len(gaps) if gaps else float("nan")


def trial_seconds(out: Path, only: str = "*") -> tuple[float, int, int]:
    """The trials' own training time (their logged step and testing timings), trials and steps."""
    seconds, trials, steps = 0.0, 0, 0
    for cmd_file in sorted((out / "trials").glob(f"{only}/cmd.json")):
        cmd = json.loads(cmd_file.read_text())
        path = Path(cmd.get("metrics_path") or "")
        path = path if path.is_absolute() else cmd_file.parent / path
        if not path.is_file():
            continue
        trials += 1
        for line in path.read_text().splitlines():
            try:
                data = json.loads(line)["data"]
            except (ValueError, KeyError):
                continue
            if "timing_s/step" in data:
                steps += 1
                seconds += float(data.get("timing_s/step") or 0) + float(data.get("timing_s/testing") or 0)
    return seconds, trials, steps


def describe(verdict: dict[str, Any] | None) -> str:
    if not verdict:
        return "no verdict"
    value = verdict.get("value")
    named = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in value.items()) if value else ""
    text = verdict["decision"] + (f" ({named})" if named else "")
    repro = verdict.get("reproduction")
    if repro:
        base = next((v for v in repro["values"] if v["role"] == "baseline"), None)
        if base is not None:
            shown, read = len(base["seeds_showing"]), len(base["seeds"])
            text += f"; {repro['rule']} on the baseline's trials {shown}/{read} seeds"
    return text


def run_example(name: str, steps: int, parallel: int, tmp: Path, verbose: bool, policy: str = "lm",
                size: tuple[str, ...] = ()) -> bool:
    ex = REPO / "examples" / name
    out = tmp / f"example-{name}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "advisor", "verify", str(ex / "run.sh"), str(ex / "metrics.jsonl"),
                           *size, *PERF, "--command", f"{sys.executable} -m sweeps.sandbox +sandbox.policy={policy}",
                           "--steps", str(steps),
                           "--parallel", str(parallel), "--out", str(out), "-f", "json"],
                          capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        print(f"verify examples/{name}: failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        return False
    verdict = result.get("verdict") or {}
    own, trials, logged = trial_seconds(out)
    sized = f" ({' '.join(size)})" if size else ""
    print(f"verify examples/{name}{sized}: {describe(verdict)}, {wall:.1f} s wall, trials' own training {own:.1f} s "
          f"({trials} trials, {logged} steps, {trial_overhead(out):.1f} s overhead a trial; objective "
          f"{result['plan']['objective']['metric']})")
    if verbose:
        for v in verdict.get("values", []):
            print(f"    {v['role']:<9} {v['values']}: " + "; ".join(
                f"seed {s['seed']} step {s['steps']} {s['state']}" for s in v["seeds"]))
    return verdict.get("decision") in ("fix confirmed", "a different value is better")


def _script(path: Path, overrides: list[str]) -> Path:
    verl = [o for o in overrides if not o.startswith("+sandbox.")]
    sandbox = [o for o in overrides if o.startswith("+sandbox.")]
    path.write_text("#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo " + " ".join(verl + sandbox) + " $@\n")
    return path


@dataclass
class Case:
    kind: str  # fault | healthy
    name: str
    overrides: list[str]
    propose: tuple[str, ...] = ()


def _base(mode: tuple[str, str], extra: tuple[str, ...], steps: int, seed: int, policy: str) -> list[str]:
    return [*COMMON, *MODES[mode[0]][mode[1]], *extra, f"trainer.total_training_steps={steps}",
            f"+sandbox.seed={seed}", f"+sandbox.policy={policy}"]


def corpus(steps: int, seed: int, policy: str = "lm") -> list[Case]:
    cases = []
    for fault in FAULTS:
        mode = FIRST_MODE.get(fault.name, fault.modes[0])
        for level, severity in enumerate(fault.severities, 1):
            cases.append(Case("fault", f"{fault.name}@{level} {mode[0]}/{mode[1]}",
                              _base(mode, severity, steps, seed, policy)))
    for mode, proposal in HEALTHY_PROPOSALS:
        cases.append(Case("healthy", f"healthy {mode[0]}/{mode[1]} --propose {proposal}",
                          _base(mode, (), steps, seed, policy), (proposal,)))
    return cases


def run_case(case: Case, steps: int, parallel: int, tmp: Path, verbose: bool) -> tuple[bool, bool | None] | None:
    """(right, reproduced): verify was right or wrong, and whether the baseline's trials showed the diagnosis
    (None: a named change, or none could be read); None: the case is left out (no harm, or no fix that helps)."""
    from run_scenarios import write_jsonl

    from advisor import load_config, suggest_run
    from sweeps import RunSettings
    from sweeps.sandbox import run
    from sweeps.verify import VerifySettings, verify

    work = tmp / case.name.replace(" ", "_").replace("/", "-").replace("=", "-")
    work.mkdir(parents=True, exist_ok=True)
    records = run(case.overrides)
    val_before = final_validation(records)
    script = _script(work / "run.sh", case.overrides)
    metrics = write_jsonl(records, work / "metrics.jsonl")
    cfg = load_config(script)
    rules = _rules()
    started = time.perf_counter()
    if case.kind == "fault":
        suggestion = suggest_run(cfg, metrics, rules=rules)
        if len(suggestion.changes) != 1:
            return _skip(case, verbose, f"suggest proposes {len(suggestion.changes)} keys")
        val_after = final_validation(run([*case.overrides, *suggestion.overrides]))
        if not val_after > val_before:
            return _skip(case, verbose, f"the fix {suggestion.overrides[0]} does not help ({val_before:.3f} -> "
                                        f"{val_after:.3f})")
        note = f"{suggestion.overrides[0]}: val {val_before:.3f} -> {val_after:.3f}"
    else:
        val_faulty = final_validation(run([*case.overrides, *case.propose]))
        if not val_faulty <= val_before - MIN_HARM:
            return _skip(case, verbose, f"{case.propose[0]} does not hurt ({val_before:.3f} -> {val_faulty:.3f})")
        note = f"{case.propose[0]}: val {val_before:.3f} -> {val_faulty:.3f}"
    settings = VerifySettings(steps=steps, rules=rules, propose=case.propose,
                              run=RunSettings(command=(sys.executable, "-m", "sweeps.sandbox"), parallel=parallel,
                                              out=work / "sweep"))
    try:
        result = verify(cfg, metrics, settings)
    except Exception as exc:  # a case that cannot run is reported, not hidden
        print(f"  error   {case.name}: {type(exc).__name__}: {exc}")
        return False, None
    decision = result.verdict.decision if result.verdict else "none"
    right = decision in (("fix confirmed", "a different value is better") if case.kind == "fault" else
                         ("keep baseline", "insufficient evidence"))
    if case.kind == "healthy" and decision == "a different value is better" and result.verdict is not None:
        named = [f"{k}={v}" for k, v in (result.verdict.value or {}).items()]
        right = all(_holdout(case.overrides, named, seed) for seed in HOLDOUT_SEEDS)
        note += f"; {' '.join(named)} on held-out seeds {HOLDOUT_SEEDS}: {'better' if right else 'not better'}"
    if verbose:
        own, trials, logged = trial_seconds(work / "sweep")
        said = describe(result.verdict.to_dict()) if result.verdict else "-"
        print(f"  {'right' if right else 'WRONG':7s} {case.name}: {note}; verify: {said} "
              f"in {time.perf_counter() - started:.0f} s ({trials} trials, {logged} steps, own {own:.0f} s)")
    repro = result.verdict.reproduction if result.verdict else None
    return right, (repro.reproduced if repro is not None else None)


def _holdout(overrides: list[str], named: list[str], seed: int) -> bool:
    """The named value beats the baseline on a seed verify did not run."""
    from sweeps.sandbox import run

    base = [o for o in overrides if not o.startswith("+sandbox.seed=")] + [f"+sandbox.seed={seed}"]
    return final_validation(run([*base, *named])) > final_validation(run(base))


def _skip(case: Case, verbose: bool, why: str) -> None:
    if verbose:
        print(f"  left out {case.name}: {why}")
    return None


def _rules() -> Any:
    from advisor.playbook import playbook_without

    return playbook_without(("memory", "throughput"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", choices=("lm", "loglinear"), default="lm", help="the sandbox's policy")
    parser.add_argument("--skip-examples", action="store_true")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--full-corpus", action="store_true", help="every corpus case, also on the LM")
    parser.add_argument("--examples-own-size", action="store_true", help="the examples at their own batch size")
    parser.add_argument("--only", nargs="*", default=None, help="case names containing any of these")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp_name:
        tmp = Path(tmp_name)
        if not args.skip_examples:
            for name in EXAMPLES:
                size = EXAMPLE_BENCH_SIZE if args.policy == "lm" and not args.examples_own_size else ()
                run_example(name, args.steps, args.parallel, tmp, args.verbose, args.policy, size)
        if not args.skip_corpus:
            only = args.only or (LM_SUBSET if args.policy == "lm" and not args.full_corpus else None)
            todo = [c for c in corpus(args.steps, args.seed, args.policy) if not only or any(o in c.name for o in only)]
            outcome: dict[str, list[bool]] = {"fault": [], "healthy": []}
            reproduced: list[bool | None] = []  # fault cases: did the baseline's trials show the diagnosis
            decided: set[str] = set()  # faults with a kept severity: their later severities are not run
            for case in todo:
                fault = case.name.split("@")[0] if case.kind == "fault" else None
                if fault in decided:
                    continue
                got = run_case(case, args.steps, args.parallel, tmp, args.verbose)
                if got is not None:
                    outcome[case.kind].append(got[0])
                    if fault:
                        decided.add(fault)
                        reproduced.append(got[1])
            print(f"{len(todo)} corpus cases in {time.perf_counter() - started:.0f} s, "
                  f"{len(outcome['fault']) + len(outcome['healthy'])} kept (--steps {args.steps}, seed {args.seed})")
            print(f"verify: fix confirmed {sum(outcome['fault'])}/{len(outcome['fault'])}")
            print(f"verify: healthy kept {sum(outcome['healthy'])}/{len(outcome['healthy'])}")
            print(f"verify: diagnosis shown on the baseline's trials {sum(r is True for r in reproduced)}/"
                  f"{len(reproduced)} faults")
    return 0


if __name__ == "__main__":
    sys.exit(main())
