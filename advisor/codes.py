"""Every finding id the advisor reports, in one table: where it is defined, what it checks, what it mirrors.

Ids come from four kinds of definition:

- ``L`` (reading the config) and ``M`` (the memory model), and ``XB001`` (a metric far out of a rule's
  band): the constants below; code builds their findings with ``CODE.finding(...)`` and compares with
  ``CODE.id``, never with a bare string;
- the pre-launch checks (``A``, ``B``, ``R``, ``W``): the ``@check(id, name, severity, source)`` registry;
- the playbook rules (``KL001``, ...): the rule files under ``knowledge/rules``.

:func:`all_codes` joins them (an id defined twice is an error) with the file:line that implements each,
which ``advisor rule ID`` prints.
"""

from __future__ import annotations

import difflib
import inspect
import re
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ._findings import Finding, Severity
from .errors import AdvisorError


class Code(NamedTuple):
    """A finding id defined in code (not a check, not a rule file): its name, default severity, what it checks
    and what it mirrors. (A NamedTuple: defined on every start-up, at an eighth of a dataclass's cost.)"""

    id: str
    name: str
    severity: Severity
    summary: str
    source: str

    def finding(self, message: str, keys: Sequence[str] = (), source: str | None = None, *,
                severity: Severity | None = None, **extra: Any) -> Finding:
        """A finding of this id (``source``/``severity`` where one occurrence cites or weighs otherwise)."""
        return Finding(self.id, self.name, severity or self.severity, message, tuple(keys),
                       self.source if source is None else source, **extra)


_HYDRA_APPLY = "hydra/_internal/config_loader_impl.py:_apply_overrides_to_config"
_SCRIPT_READER = "advisor: launch-script reader"
_MEMORY_MODEL = "advisor memory model (docs/memory.md); ok < 80% of capacity (Fujii et al. 2024)"

# -- reading the config (advisor/_config.py) ---------------------------------------------------------------------
UNKNOWN_KEY = Code("L001", "unknown-key", "error",
                   "a key that is not in verl's defaults of the version (with \"did you mean\" and the versions "
                   "that have it)",
                   "hydra/_internal/config_loader_impl.py (Could not override ...); verl config dataclasses")
DEPRECATED_KEY = Code("L002", "deprecated-key", "warning", "a key verl renamed or deprecated but still reads",
                      "knowledge/deprecated_keys.yaml (each entry cites the verl change)")
REMOVED_KEY = Code("L003", "removed-key", "error",
                   "a key verl no longer reads (renamed or removed), with what replaced it",
                   "knowledge/deprecated_keys.yaml (each entry cites the verl change)")
REMOVED_VALUE = Code("L004", "removed-value", "error", "a value verl no longer accepts for a key",
                     "knowledge/deprecated_keys.yaml (values; each entry cites the verl change)")
DELETE_MISSING_KEY = Code("L005", "delete-missing-key", "error",
                          "'~key' deleting a key that is not in the config (Hydra refuses it)", _HYDRA_APPLY)
ADD_EXISTING_KEY = Code("L006", "add-existing-key", "error",
                        "'+key=' adding a key that already exists (Hydra refuses it)", _HYDRA_APPLY)
ADDED_KEY_UNREAD = Code("L007", "added-key-unread", "warning",
                        "'+key=' adding a key verl does not read that is close to one it does",
                        "advisor: key index of verl defaults")
WRONG_TYPE = Code("L008", "wrong-type", "error",
                  "a value whose type verl's config dataclasses reject (text where a number or boolean goes)",
                  "verl config dataclasses (omega_conf_to_dataclass)")
UNDEFINED_VARIABLE = Code("L009", "undefined-variable", "info",
                          "a launch-script variable the script does not define: the keys built from it keep the "
                          "literal text", _SCRIPT_READER)
SCRIPT_NOTE = Code("L010", "script-note", "info", "something in a launch script the reader could not follow",
                   _SCRIPT_READER)
INVALID_OVERRIDE = Code("L011", "invalid-override", "error",
                        "an argument that is not a valid Hydra override (verl would refuse to start)",
                        "hydra override grammar (hydra/core/override_parser)")
SET_AT_LAUNCH = Code("L012", "set-at-launch", "info",
                     "a key fed by a job scheduler's variable (Slurm, ...): known only at launch, so the checks "
                     "that need it are skipped", f"{_SCRIPT_READER} (knowledge/scheduler_variables.yaml)")
CONFIG_GROUP_CHOICE = Code("L013", "config-group-choice", "info",
                           "a config-group choice (group@package=option) whose keys the advisor cannot see",
                           "hydra: config group overrides (group@package=option)")

# -- the memory model (advisor/_check_report.py) -----------------------------------------------------------------
MEMORY_OOM = Code("M001", "memory-oom", "error",
                  "a phase whose predicted GPU memory does not fit the card (advisor check --gpu)", _MEMORY_MODEL)
MEMORY_TIGHT = Code("M002", "memory-tight", "warning",
                    "a phase whose predicted GPU memory is over 80% of the card (advisor check --gpu)", _MEMORY_MODEL)
MEMORY_NOT_ESTIMATED = Code("M003", "memory-not-estimated", "info",
                            "GPU memory the model could not estimate (an unknown model or micro batch)",
                            "advisor memory model")

# -- the playbook's safety net (advisor/_bands.py) ---------------------------------------------------------------
FAR_OUT_OF_BAND = Code("XB001", "far-out-of-band", "info",
                       "a metric several times outside a healthy band a rule cites, that no warning names",
                       "the band's source in the rule file that cites it")

CODES: dict[str, Code] = {c.id: c for c in globals().values() if isinstance(c, Code)}


class CodeInfo(NamedTuple):
    """One finding id as ``advisor rule`` shows it."""

    id: str
    name: str
    severity: str
    kind: str  # load | memory | band | check | rule
    summary: str
    sources: tuple[str, ...]  # what it mirrors: verl file:line, docs, or the advisor's own reasoning
    location: str  # file:line of the code or rule file that implements it
    extra: Mapping[str, Any] = MappingProxyType({})  # tree (rules); verl (checks limited to versions)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "severity": self.severity, "kind": self.kind,
                "summary": self.summary, "sources": list(self.sources), "location": self.location, **self.extra}


# the top package's folder (wherever this module sits in it) and the checkout or site-packages above it
_PACKAGE = Path(str(sys.modules[__name__.partition(".")[0]].__file__)).resolve().parent
_ROOT = _PACKAGE.parent
_KIND = {"L": "load", "M": "memory", "X": "band"}


def _relative(path: str | Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(_ROOT)) if path.is_relative_to(_ROOT) else str(path)


def _constant_sites() -> dict[str, str]:
    """Code id -> the file:line that builds its finding: ``NAME.finding(`` first, then a line that picks the
    constant (``code = MEMORY_OOM if ...``), then one that compares with it (``f.id == NAME.id``)."""
    names = {name: c.id for name, c in globals().items() if isinstance(c, Code)}
    word = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b(\.finding\(|\.id\b|\.name\b)?")
    best: dict[str, tuple[int, str]] = {}
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.resolve() == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith(("from ", "import ")):
                continue
            for match in word.finditer(line):
                rank = 0 if match.group(2) == ".finding(" else 2 if match.group(2) else 1
                code = names[match.group(1)]
                if code not in best or rank < best[code][0]:
                    best[code] = (rank, f"{_relative(path)}:{number}")
    return {code: site for code, (_, site) in best.items()}


def _id_line(path: str) -> int:
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("id:"):
            return number
    return 1


@cache
def all_codes() -> dict[str, CodeInfo]:
    """Every finding id: the code constants, the registered checks and the playbook's rules, sorted by id.

    Raises:
        PlaybookError: a rule file does not load, or an id is defined in two places.
    """
    from ._checks import CHECKS
    from ._playbook import load_playbook
    from .errors import PlaybookError

    sites = _constant_sites()
    found: dict[str, CodeInfo] = {}

    def add(info: CodeInfo) -> None:
        if info.id in found:
            raise PlaybookError(f"finding id {info.id} is defined twice: {found[info.id].location} and "
                                f"{info.location}")
        found[info.id] = info

    for c in CODES.values():
        add(CodeInfo(c.id, c.name, c.severity, _KIND[c.id[0]], c.summary, (c.source,), sites.get(c.id, "")))
    for chk in CHECKS:
        code = chk.fn.__code__
        sources = (chk.source, *(f"{src} (verl {spec})" for spec, src in chk.sources))
        add(CodeInfo(chk.id, chk.name, chk.severity, "check", chk.summary, sources,
                     f"{_relative(inspect.getsourcefile(chk.fn) or code.co_filename)}:{code.co_firstlineno}",
                     {"verl": chk.verl} if chk.verl else {}))
    for rule in load_playbook():
        add(CodeInfo(rule.id, rule.name, str(rule.severity), "rule", rule.summary, rule.sources,
                     f"{_relative(rule.path)}:{_id_line(rule.path)}",
                     {"tree": str(rule.tree), **({"verl": rule.verl} if rule.verl else {})}))
    return dict(sorted(found.items()))


def lookup(code_id: str) -> CodeInfo:
    """The id (any case), or an AdvisorError (exit 2) with the closest ids."""
    codes = all_codes()
    wanted = code_id.strip().upper()
    if wanted in codes:
        return codes[wanted]
    close = difflib.get_close_matches(wanted, list(codes), n=3, cutoff=0.6)
    hint = "did you mean " + " or ".join(f"'{c}'" for c in close) + "?" if close else \
        "'advisor rule --list' lists them"
    raise AdvisorError(f"no finding has the id '{code_id}'", suggestion=hint)
