"""``advisor calibrate``: run the harness for one shape and print what it measured (text or JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from advisor.errors import ConfigError


def _ints(text: str | None, option: str) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"{option} takes integers separated by commas, not {text!r}") from None
    if any(v < 1 for v in values) or len(values) > 2:
        raise ConfigError(f"{option} takes one or two positive integers, not {text!r}")
    return values


def build_request(model: str | None, model_config: str | None, *, tokens: int, phase: str | None,
                  layers: str | None, vocab: str | None, token_pair: str | None, shape: dict[str, int | None],
                  switches: dict[str, Any]) -> Any:
    from ._measure import PHASES, Switches
    from ._request import Request

    phase = phase or "update"
    if phase not in PHASES:  # click's Choice already holds the command line to these
        raise ConfigError(f"--phase takes one of {', '.join(PHASES)}, not {phase!r}")
    if not model and not model_config:
        raise ConfigError("name a model of the catalog (knowledge/models.yaml) or pass --model-config",
                          suggestion="e.g. advisor calibrate Qwen2.5-0.5B --tokens 1024")
    request = Request(model or model_config or "", tokens, switches=Switches(**switches), phase=phase,
                      layers=_ints(layers, "--layers"), vocab=_ints(vocab, "--vocab"),
                      token_pair=_ints(token_pair, "--token-pair"), model_config=model_config, **shape)
    request.spec()  # an unknown model or a bad config.json fails here, with its one-line error
    return request


def run_command(request: Any, *, all_phases: bool, fmt: str) -> None:
    from ._request import run, run_phases

    results = run_phases(request) if all_phases else {request.phase: run(request)}
    if fmt == "json":
        click.echo(json.dumps({"command": request.command(with_phase=not all_phases), "shape": request.shape(),
                               "switches": request.switches.to_dict(), "results": results}, indent=2))
        return
    click.echo(request.command(with_phase=not all_phases))
    for phase, result in results.items():
        click.echo(f"  {phase:<14} {_describe(result)}")


def _describe(result: dict[str, Any]) -> str:
    for key, unit in (("bytes_per_token_layer", "B per token per layer"), ("bytes_per_logit", "B per logit"),
                      ("bytes_per_token", "B per token")):
        if key in result and "peak_bytes" not in result:
            return f"{result[key]:,.3f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"peak {result['peak_bytes'] / 1024**3:.3f} GiB ({result['bytes_per_token']:,.0f} B per token)"


def write_all(out: Path) -> None:
    import yaml

    from ._suite import measure_all

    data = measure_all(progress=lambda ident: click.echo(f"measuring {ident}", err=True))
    header = ("# Coefficients measured by the GPU-free memory harness (advisor.calibrate, "
              "docs/memory-calibration.md).\n"
              "# Written by `advisor calibrate --all --out knowledge/memory_measured.yaml`; each entry's `command`\n"
              "# re-measures it. knowledge/memory.yaml's logits/activations constants name these ids as source.\n")
    out.write_text(header + yaml.safe_dump(data, sort_keys=False, width=200), encoding="utf-8")
    click.echo(f"wrote {len(data['entries'])} entries to {out}", err=True)




__all__ = ["build_request", "run_command", "write_all"]
