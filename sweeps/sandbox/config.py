"""Reading a config into ``Args``: verl's newest defaults plus the overrides through the advisor's own loader (a typo
fails the same way it would in ``advisor check``), each key coerced to the type ``Args`` declares, then the checks
verl makes before the first step (verl_asserts.py).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any

from .args import LR_SCALES, POLICY_ENV, SANDBOX_KEYS, VERL_VERSION, Args, SandboxConfigError
from .verl_asserts import validate


def parse_args(overrides: Sequence[str]) -> tuple[Args, Any]:
    """Load verl's defaults plus ``overrides`` through the advisor's loader and read the keys the sandbox models.

    Raises:
        SandboxConfigError: an error finding (typo, removed key, wrong type), or a value the sandbox cannot run.
        advisor.ConfigError: an override that cannot be parsed.
    """
    from advisor import load_config
    from advisor.spelling import closest

    # `sandbox.x=1` is accepted without Hydra's '+' (the key is the sandbox's own, never in verl's defaults)
    overrides = [f"+{o}" if o.startswith("sandbox.") else o for o in overrides]
    cfg = load_config(None, overrides, verl_version=VERL_VERSION)
    errors = [f.message for f in cfg.findings if f.severity == "error"]
    user_sandbox_keys = [s.key for s in cfg.settings if s.key.startswith("sandbox.")]
    for key in user_sandbox_keys:
        if key not in SANDBOX_KEYS:
            close = closest(key, SANDBOX_KEYS, limit=1)  # the advisor's one did-you-mean engine
            hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(SANDBOX_KEYS))}"
            errors.append(f"key '{key}' is not a sandbox knob{hint}")
    if errors:
        raise SandboxConfigError("\n".join(errors))
    for finding in cfg.findings:
        if finding.severity == "warning":
            print(f"warning: {finding.message}", file=sys.stderr)
    if cfg.get("algorithm.use_kl_in_reward") and cfg.get("actor_rollout_ref.actor.use_kl_loss"):
        print("NOTICE: You have both enabled in-reward kl and kl loss.", file=sys.stderr)  # verl/utils/config.py

    values: dict[str, Any] = {}
    for f in dataclasses.fields(Args):
        raw = cfg.get(f.metadata["key"], f.default)
        values[f.name] = _coerce(f.metadata["key"], raw, str(f.type))
    if cfg.get("sandbox.policy") is None:
        values["policy"] = os.environ.get(POLICY_ENV) or "lm"
    if values["lr_scale"] is None and values["policy"] in LR_SCALES:
        values["lr_scale"] = LR_SCALES[values["policy"]]
    args = Args(**values)
    validate(args)
    return args, cfg


def _coerce(key: str, raw: Any, annotation: str) -> Any:
    """Read a config value as the type Args declares for it (OmegaConf gives 1 for a float written as 1)."""
    if raw is None:
        return None
    base = annotation.split("|")[0].strip()
    try:
        if base == "bool":
            if isinstance(raw, str):
                return raw.strip().lower() in ("1", "true", "yes")
            return bool(raw)
        if base.startswith("tuple"):
            items = [raw] if isinstance(raw, str) else list(raw)
            return tuple(float(x) for x in items) if "float" in base else tuple(str(x) for x in items)
        if base == "float":
            return float(raw)
        if base == "int":
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            return int(raw)
    except (TypeError, ValueError) as err:
        raise SandboxConfigError(f"'{key}' is {raw!r}, which the sandbox cannot read as {base}") from err
    return str(raw)
