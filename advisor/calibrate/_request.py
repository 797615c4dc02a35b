"""One harness measurement as the ``advisor calibrate`` command asks for it, and the command that repeats it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from advisor.memory import ModelSpec, resolve_model

from ._measure import PHASES, Phase, Shape, Switches, measure_phase, rank_tokens
from ._slopes import Slope, layer_slope, logit_slope, token_slope


@dataclass(frozen=True)
class Request:
    model: str
    tokens: int
    switches: Switches = field(default_factory=Switches)
    phase: Phase = "update"
    layers: tuple[int, ...] = ()  # two depths: bytes per token per layer
    vocab: tuple[int, ...] = ()  # two vocab sizes: bytes per logit; one: the model built with that vocab
    token_pair: tuple[int, ...] = ()  # a second token count: bytes per token
    hidden: int | None = None  # shape overrides (tests and finite differences)
    intermediate: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    model_config: str | None = None

    def spec(self) -> ModelSpec:
        spec = resolve_model(model=None if self.model_config else self.model, model_config=self.model_config)
        overrides: dict[str, Any] = {k: v for k, v in (("hidden", self.hidden), ("intermediate", self.intermediate),
                                       ("heads", self.heads), ("kv_heads", self.kv_heads),
                                       ("head_dim", self.head_dim)) if v is not None}
        return replace(spec, **overrides) if overrides else spec

    def command(self, *, with_phase: bool = True) -> str:
        """The ``advisor calibrate`` command line that measures this again."""
        s = self.switches
        args = ["advisor", "calibrate", self.model_config or self.model, "--tokens", str(self.tokens),
                *(["--phase", self.phase] if with_phase else []), "--verl-version", s.verl_version,
                "--entropy", s.entropy]
        for flag, value in (("--layers", self.layers), ("--vocab", self.vocab), ("--token-pair", self.token_pair)):
            if value:
                args += [flag, ",".join(map(str, value))]
        for flag, size in (("--hidden", self.hidden), ("--intermediate", self.intermediate), ("--heads", self.heads),
                           ("--kv-heads", self.kv_heads), ("--head-dim", self.head_dim)):
            if size is not None:
                args += [flag, str(size)]
        if s.gradient_checkpointing:
            args.append("--gradient-checkpointing")
        if s.lora_rank:
            args += ["--lora-rank", str(s.lora_rank)]
        if s.temperature != 1.0:
            args += ["--temperature", repr(s.temperature)]
        if s.ulysses_sp != 1:
            args += ["--ulysses-sp", str(s.ulysses_sp)]
        if not s.remove_padding:
            args.append("--no-remove-padding")
        if s.response_tokens:
            args += ["--response-tokens", str(s.response_tokens)]
        return shlex.join(args)

    def shape(self) -> dict[str, Any]:
        spec = self.spec()
        return {"model": spec.name, "hidden": spec.hidden, "intermediate": spec.intermediate, "heads": spec.heads,
                "kv_heads": spec.kv_heads, "head_dim": spec.head_dim, "layers": list(self.layers) or spec.layers,
                "vocab": list(self.vocab) or spec.vocab, "tokens": self.tokens,
                "tokens_per_rank": rank_tokens(self.tokens, self.switches.ulysses_sp)}


def run(request: Request) -> dict[str, Any]:
    """Measure ``request``: a slope when two depths, vocab sizes or token counts are given, else the peak."""
    spec = request.spec()
    s = request.switches
    slope: Slope | None = None
    if len(request.layers) == 2:
        slope = layer_slope(spec, request.tokens, s, request.phase, layers=(request.layers[0], request.layers[1]),
                            vocab=request.vocab[0] if request.vocab else 256)
    elif len(request.vocab) == 2:
        slope = logit_slope(spec, request.tokens, s, request.phase, vocabs=(request.vocab[0], request.vocab[1]),
                            layers=request.layers[0] if request.layers else 1)
    elif request.token_pair:
        slope = token_slope(spec, (request.tokens, request.token_pair[0]), s, request.phase,
                            layers=request.layers[0] if request.layers else 2,
                            vocab=request.vocab[0] if request.vocab else 256)
    if slope is not None:
        return slope.to_dict()
    n = rank_tokens(request.tokens, s.ulysses_sp)
    shape = Shape(spec, n, layers=request.layers[0] if request.layers else None,
                  vocab=request.vocab[0] if request.vocab else None)
    peak = measure_phase(shape, s, request.phase)
    return {"phase": request.phase, "peak_bytes": peak, "tokens_per_rank": n, "bytes_per_token": round(peak / n, 3)}


def run_phases(request: Request) -> dict[str, dict[str, Any]]:
    """Every phase's peak at the request's shape (the command's default output)."""
    return {phase: run(replace(request, phase=phase)) for phase in PHASES}
