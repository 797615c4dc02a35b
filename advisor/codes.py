"""Every finding id the advisor reports, in one table: where it is defined, what it checks, what it mirrors.

Ids come from four kinds of definition:

- ``L`` (reading the config) and ``M`` (the memory model), and ``XB001`` (a metric far out of a rule's
  band): the constants below; code builds their findings with ``CODE.finding(...)`` and compares with
  ``CODE.id``, never with a bare string;
- the pre-launch checks (``A``, ``B``, ``R``, ``W``): the ``@check(id, name, severity, source)`` registry;
- the playbook rules (``KL001``, ...): the rule files under ``knowledge/rules``.

``advisor.cli._code_table`` joins them (an id defined twice is an error) with the file:line that implements
each, which ``advisor rule ID`` prints; it sits above every stage, so this module stays a leaf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .findings import Finding, Severity


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

# -- reading the config (advisor/load/_config.py) ---------------------------------------------------------------------
UNKNOWN_KEY = Code("L001", "unknown-key", Severity.ERROR,
                   "a key that is not in verl's defaults of the version (with \"did you mean\" and the versions "
                   "that have it)",
                   "hydra/_internal/config_loader_impl.py (Could not override ...); verl config dataclasses")
DEPRECATED_KEY = Code("L002", "deprecated-key", Severity.WARNING, "a key verl renamed or deprecated but still reads",
                      "knowledge/deprecated_keys.yaml (each entry cites the verl change)")
REMOVED_KEY = Code("L003", "removed-key", Severity.ERROR,
                   "a key verl no longer reads (renamed or removed), with what replaced it",
                   "knowledge/deprecated_keys.yaml (each entry cites the verl change)")
REMOVED_VALUE = Code("L004", "removed-value", Severity.ERROR, "a value verl no longer accepts for a key",
                     "knowledge/deprecated_keys.yaml (values; each entry cites the verl change)")
DELETE_MISSING_KEY = Code("L005", "delete-missing-key", Severity.ERROR,
                          "'~key' deleting a key that is not in the config (Hydra refuses it)", _HYDRA_APPLY)
ADD_EXISTING_KEY = Code("L006", "add-existing-key", Severity.ERROR,
                        "'+key=' adding a key that already exists (Hydra refuses it)", _HYDRA_APPLY)
ADDED_KEY_UNREAD = Code("L007", "added-key-unread", Severity.WARNING,
                        "'+key=' adding a key verl does not read that is close to one it does",
                        "advisor: key index of verl defaults")
WRONG_TYPE = Code("L008", "wrong-type", Severity.ERROR,
                  "a value whose type verl's config dataclasses reject (text where a number or boolean goes)",
                  "verl config dataclasses (omega_conf_to_dataclass)")
UNDEFINED_VARIABLE = Code("L009", "undefined-variable", Severity.INFO,
                          "a launch-script variable the script does not define: the keys built from it keep the "
                          "literal text", _SCRIPT_READER)


def undefined_variable_message(what: str, keys: Sequence[str]) -> str:
    """L009's message: what the script leaves undefined, and the keys that keep its literal text."""
    return f"{what}; {', '.join(keys)} keep{'s' if len(keys) == 1 else ''} the literal text"


SCRIPT_NOTE = Code("L010", "script-note", Severity.INFO, "something in a launch script the reader could not follow",
                   _SCRIPT_READER)
INVALID_OVERRIDE = Code("L011", "invalid-override", Severity.ERROR,
                        "an argument that is not a valid Hydra override (verl would refuse to start)",
                        "hydra override grammar (hydra/core/override_parser)")
SET_AT_LAUNCH = Code("L012", "set-at-launch", Severity.INFO,
                     "a key fed by a job scheduler's variable (Slurm, ...): known only at launch, so the checks "
                     "that need it are skipped", f"{_SCRIPT_READER} (knowledge/scheduler_variables.yaml)")
CONFIG_GROUP_CHOICE = Code("L013", "config-group-choice", Severity.INFO,
                           "a config-group choice (group@package=option) whose keys the advisor cannot see",
                           "hydra: config group overrides (group@package=option)")
PRINTED_KEY = Code("L014", "printed-key", Severity.INFO,
                   "keys a run's log printed that the version's defaults lack: the run's own verl (a build between "
                   "releases, a fork) had them, so they are read as real, never as unknown",
                   "verl/trainer/main_ppo.py: pprint(OmegaConf.to_container(config, resolve=True)) at start-up")

# -- the memory model (advisor/checks/_report.py) -----------------------------------------------------------------
MEMORY_OOM = Code("M001", "memory-oom", Severity.ERROR,
                  "a phase whose predicted GPU memory does not fit the card (advisor check --gpu)", _MEMORY_MODEL)
MEMORY_TIGHT = Code("M002", "memory-tight", Severity.WARNING,
                    "a phase whose predicted GPU memory is over 80% of the card (advisor check --gpu)", _MEMORY_MODEL)
MEMORY_NOT_ESTIMATED = Code("M003", "memory-not-estimated", Severity.INFO,
                            "GPU memory the model could not estimate (an unknown model or micro batch)",
                            "advisor memory model")

# -- the playbook's safety net (advisor/playbook/_bands.py) -----------------------------------------------------
FAR_OUT_OF_BAND = Code("XB001", "far-out-of-band", Severity.INFO,
                       "a metric several times outside a healthy band a rule cites, that no warning names",
                       "the band's source in the rule file that cites it")

CODES: dict[str, Code] = {c.id: c for c in globals().values() if isinstance(c, Code)}
