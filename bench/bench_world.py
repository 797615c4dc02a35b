"""`advisor suggest` judged by intervention on the world (issue 35): bench/world/data/world-v1.jsonl.gz.

    python bench/bench_world.py [--data FILE] [--splits train test] [--run-missing] [--fresh N [--start S]] [-v]

Each world run of the dataset (bench/world/world.py says how it is drawn, generate.py how it is labelled) is read
back from its stored metrics (the first of its two seeds) and given to ``advisor suggest`` (its learning rules;
the sandbox's timings and memory are a CPU's), as the corpus bench does. No sandbox run is repeated. For each
split it prints exactly:

    world train: key right N/M        the advisor's top change's key is in the run's label (M: runs whose label is
                                      not empty, i.e. some one-key change improved validation beyond noise: a
                                      stored candidate, or a one-key diff --run-missing ran since and kept)
    world train: change improves N/M  the advisor's whole proposed diff improves validation beyond noise (same M),
                                      read from the stored counterfactual of that diff; a diff that was not stored
                                      (the rules changed since the world was generated) counts as not improving
                                      unless --run-missing runs it on the world's two seeds (kept in
                                      world-v<N>-extra.jsonl.gz beside the dataset and read back as stored;
                                      two more where those two leave it open, below)
    world train: healthy no change N/M  runs whose label is empty: the advisor proposes no change

and the same three with ``world test:``. ``--splits train`` scores the train split alone: fitting reads nothing of
the test split, not even its per-run lines. ``--fresh N`` draws N new worlds of the test split's config region from
world seeds never used (``--start``, default 2,000,000; kept in bench/world/data/fresh-<start>.jsonl.gz, resumable)
and prints the test lines on them instead of the stored test split. ``--stored-labels`` scores against the labels
the generator stored, without the keys of the diffs run since (for comparison with earlier figures).

**Four seeds where two leave a change open.** Two seeds judge a change with one degree of freedom. A candidate
whose two gains leave the verdict open (world.undecided: a mean gain above the floor with a t-statistic between 1
and 6, whichever way the two seeds had it) is judged on four: its gains on the world's two further sandbox seeds,
which ``bench/world/reseed.py`` runs and keeps in ``<dataset>-seeds34.jsonl.gz`` (and ``--run-missing`` runs for a
proposed diff). ``--two-seeds`` judges every change on two seeds, as the figures before reseed.py were.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "world"))

import world  # noqa: E402
from bench_suggest_corpus import advise  # noqa: E402
from reseed import more_seeds_path, read_more_seeds, run_more  # noqa: E402


def advice_of(record: dict[str, Any]) -> Any:
    """``advisor suggest`` on this checkout for the record's run (its first seed's metrics)."""
    overrides = [*record["overrides"], f"+sandbox.seed={record['sandbox_seeds'][0]}"]
    return advise(overrides, [(int(step), metrics) for step, metrics in record["metrics"][0]])


def proposal_of(record: dict[str, Any]) -> tuple[list[str], str | None]:
    """The advisor's diff for the record's run (first seed) on this checkout, and its top change's key."""
    result = advice_of(record)
    return list(result.overrides), (result.changes[0].key if result.changes else None)


Extra = dict[tuple[str, int, tuple[str, ...]], list[float]]


@dataclass
class MoreSeeds:
    """What reseed.py (or --run-missing) ran on the worlds' two further seeds: the base runs' validations and the
    undecided candidates' gains there, and the file new ones are kept in."""

    bases: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    gains: Extra = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def of(cls, data: Path) -> MoreSeeds:
        path = more_seeds_path(data)
        return cls(*read_more_seeds(path), path)


def extra_path(data: Path) -> Path:
    """Where --run-missing keeps the counterfactuals it ran: beside the dataset, one gzip member per diff."""
    return world.beside(data, "extra")


def read_extra(path: Path) -> Extra:
    """The counterfactuals --run-missing ran before: (split, world seed, sorted diff) -> paired gains."""
    return {(e["split"], int(e["seed"]), tuple(sorted(e["overrides"]))): [math.nan if g is None else float(g)
                                                                        for g in e["gains"]]
            for e in world.read(path)}


def _key(record: dict[str, Any], diff: list[str] | tuple[str, ...]) -> tuple[str, int, tuple[str, ...]]:
    return record.get("split", ""), int(record["seed"]), tuple(sorted(diff))


def with_more_seeds(record: dict[str, Any], diff: list[str] | tuple[str, ...], gains: list[float],
                    more: MoreSeeds | None) -> list[float]:
    """The diff's gains on the world's two seeds, and on the two further ones where reseed.py ran it."""
    return gains + (more.gains.get(_key(record, diff), []) if more else [])


def stored_gains(record: dict[str, Any], diff: list[str], extra: Extra | None = None,
                 more: MoreSeeds | None = None) -> list[float] | None:
    for c in record.get("candidates", []):
        if sorted(c["overrides"]) == sorted(diff):
            two = [math.nan if g is None else float(g) for g in c["gains"]]
            return with_more_seeds(record, diff, two, more)
    if not extra or _key(record, diff) not in extra:
        return None
    return with_more_seeds(record, diff, extra[_key(record, diff)], more)


def label_of(record: dict[str, Any], extra: Extra | None = None, more: MoreSeeds | None = None) -> set[str]:
    """The run's label (world.label): the keys of its one-key changes that improve validation beyond noise, the
    stored candidates' and those of the one-key diffs --run-missing ran since. The issue's candidates are "every fix
    any rule offers": a rule changed after the world was drawn offers fixes the generator never ran, and the one the
    bench runs is as much an intervention as a stored one (a healthy run whose proposed change improves it was not
    healthy). With ``more``, a candidate two seeds left undecided is judged on the four it ran on."""
    if more is None:
        keys = set(record["label"])
    else:
        keys = set(world.label([{**c, "gains": with_more_seeds(record, c["overrides"], c["gains"], more)}
                                for c in record.get("candidates", [])]))
    for (split, seed, diff), gains in (extra or {}).items():
        if (split == record.get("split", "") and seed == int(record["seed"]) and len(diff) == 1
                and world.improves(with_more_seeds(record, diff, gains, more))):
            keys.add(world.key_of(diff[0]))
    return keys


def run_gains(record: dict[str, Any], diff: list[str]) -> list[float]:
    """The diff's paired validation gains on the world's two seeds (a sandbox run each, as the generator runs its
    candidates; a diff the sandbox refuses gains NaN: it does not improve the run)."""
    from generate import validation

    return [validation([*record["overrides"], *diff], seed)[0] - base
            for seed, base in zip(record["sandbox_seeds"], record["val"], strict=True)]


def score(records: list[dict[str, Any]], run_missing: bool, verbose: bool, name: str,
          propose: Callable[[dict[str, Any]], tuple[list[str], str | None]] = proposal_of,
          extra: Extra | None = None, keep: Path | None = None, grown: bool = True,
          more: MoreSeeds | None = None) -> list[str]:
    """The three lines of a split; ``propose`` gives the advisor's diff and top key for a record. ``extra`` holds
    counterfactuals run earlier; a diff run now is added to it and, with ``keep``, appended to that file. A run's label
    takes in the kept one-key diffs' keys (``label_of``) unless ``grown`` is False (the labels as generated). With
    ``more``, a change two seeds leave undecided is judged on four (reseed.py ran it, or --run-missing runs it now)."""
    key_right = improved = quiet = missing = unseeded = 0
    faults = healthy = 0
    for r in records:
        diff, top = propose(r)
        gains = stored_gains(r, diff, extra, more) if diff else None
        if diff and gains is None:
            if run_missing:
                gains = run_gains(r, diff)
                if extra is not None:
                    extra[(r.get("split", ""), int(r["seed"]), tuple(sorted(diff)))] = gains
                if keep is not None:
                    world.append(keep, {"split": r.get("split", ""), "seed": r["seed"], "overrides": sorted(diff),
                                        "gains": [None if not math.isfinite(g) else round(g, 5) for g in gains]})
            elif r["label"]:
                missing += 1
        if more is not None and gains is not None and world.undecided(gains):
            if run_missing and more.path is not None:
                more.gains[_key(r, diff)] = run_more(r, tuple(sorted(diff)), more.bases, more.path)
                gains = stored_gains(r, diff, extra, more)
            else:
                unseeded += 1
        label = label_of(r, extra if grown else None, more if grown else None)
        better = bool(diff) and gains is not None and world.improves(gains)
        if label:
            faults += 1
            key_right += top in label
            improved += better
        else:
            healthy += 1
            quiet += not diff
        if verbose:
            fault = f"{r['fault']['name']}={r['fault']['value']}" if r["fault"] else "no fault"
            print(f"  {name} {r['seed']} {r['mode']}/{r['kl']} {fault}: label {sorted(label) or '-'}; advisor "
                  f"{' '.join(diff) or '(no change)'}{'' if gains is None else f' gains {gains}'}")
    if missing:
        print(f"world {name}: {missing} proposed diffs are not in the stored counterfactuals and count as not "
              "improving (--run-missing runs them)")
    if unseeded:
        print(f"world {name}: {unseeded} proposed diffs are undecided on two seeds and were not run on two more "
              "(bench/world/reseed.py or --run-missing runs them)")
    return [f"world {name}: key right {key_right}/{faults}", f"world {name}: change improves {improved}/{faults}",
            f"world {name}: healthy no change {quiet}/{healthy}"]


def describe(records: list[dict[str, Any]], name: str, extra: Extra | None = None,
             more: MoreSeeds | None = None) -> str:
    faults = sum(1 for r in records if r["fault"])
    hurt = sum(1 for r in records if label_of(r, extra, more))
    line = (f"{name}: {len(records)} world runs, {faults} with an injected fault, {hurt} with a non-empty label "
            f"(faults), {len(records) - hurt} healthy (empty label)")
    if more is None:
        return line + "; every change judged on two seeds"
    four = open_ = 0
    for r in records:
        world_key = (r.get("split", ""), int(r["seed"]))
        diffs = [c["overrides"] for c in r.get("candidates", [])]
        diffs += [list(d) for (split, seed, d) in (extra or {}) if (split, seed) == world_key]
        for diff in diffs:
            gains = stored_gains(r, diff, extra, more) or []
            four += len(gains) == 4
            open_ += world.undecided(gains)
    return line + (f"; {four} changes judged on four seeds (two left them undecided)"
                   + (f", {open_} undecided ones not yet run on four (bench/world/reseed.py)" if open_ else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=world.DATA)
    parser.add_argument("--splits", nargs="+", choices=["train", "test"], default=["train", "test"],
                        help="the splits to score (fitting: train alone)")
    parser.add_argument("--run-missing", action="store_true",
                        help="run the proposed diffs the dataset did not store (2 sandbox runs each; kept in "
                             "world-v<N>-extra.jsonl.gz and read back as stored)")
    parser.add_argument("--fresh", type=int, default=0, help="score N freshly drawn test worlds instead")
    parser.add_argument("--start", type=int, default=world.SEED_RANGES["fresh"][0])
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per world run")
    parser.add_argument("--stored-labels", action="store_true",
                        help="score against the labels the generator stored (without the kept diffs' keys)")
    parser.add_argument("--two-seeds", action="store_true",
                        help="judge every change on the world's two seeds only, as before reseed.py")
    parser.add_argument("--first", type=int, default=None,
                        help="score each split's first N world seeds only (a pilot against the same worlds)")
    args = parser.parse_args(argv)
    if not args.fresh and not args.data.is_file():
        print(f"bench_world: {args.data}: no such dataset file (python bench/world/generate.py writes it)",
              file=sys.stderr)
        return 2
    stored = [r for r in world.read(args.data) if "error" not in r]
    splits = {name: [r for r in stored if r["split"] == name] for name in args.splits}
    stores = {name: (extra_path(args.data), read_extra(extra_path(args.data)), MoreSeeds.of(args.data))
              for name in splits}
    if args.fresh:
        from generate import fresh_path, generate

        path = fresh_path(args.start, args.data.parent)
        splits["test"] = [r for r in generate(path, ["fresh"], args.fresh, args.start) if "error" not in r]
        stores["test"] = (extra_path(path), read_extra(extra_path(path)), MoreSeeds.of(path))
        print(f"test split: {args.fresh} fresh worlds from world seed {args.start} ({path})")
    if args.first is not None:
        first = {name: args.start if name == "test" and args.fresh else world.SEED_RANGES[name][0] for name in splits}
        splits = {name: [r for r in records if int(r["seed"]) < first[name] + args.first]
                  for name, records in splits.items()}
    lines = []
    for name, records in splits.items():
        keep, extra, more = stores[name]
        more = None if args.two_seeds or args.stored_labels else more
        lines += score(records, args.run_missing, args.verbose, name, extra=extra, keep=keep,
                       grown=not args.stored_labels, more=more)
        # after scoring: a diff run now may have grown a label
        print(describe(records, name, None if args.stored_labels else extra, more))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
