"""``advisor calibrate``: measure activation and logit memory of verl's phases on a fake-tensor model (no ..."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.errors import ConfigError, install_hint

from ._app import app


@app.command()
@click.argument("model", required=False)
@click.option("--model-config", type=click.Path(exists=True, dir_okay=True), default=None,
              help="A Hugging Face config.json (or its folder) instead of a catalog MODEL.")
@click.option("--tokens", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Tokens of the micro batch (packed rows; all ranks of the Ulysses group together).")
@click.option("--phase", type=click.Choice(["update", "log_prob", "ref", "critic_update", "critic_values"]),
              default=None, help="One phase (default: every phase's peak; the update for --layers/--vocab slopes).")
@click.option("--layers", default=None, metavar="N[,M]", help="Decoder layers built; two: bytes per token per layer.")
@click.option("--vocab", default=None, metavar="V[,W]", help="Vocab built; two: bytes per logit.")
@click.option("--token-pair", default=None, metavar="T", help="A second token count: bytes per token.")
@click.option("--gradient-checkpointing", is_flag=True, help="HF gradient checkpointing (use_reentrant=False).")
@click.option("--lora-rank", type=click.IntRange(min=0), default=0, show_default=True, help="PEFT LoRA, all-linear.")
@click.option("--entropy", type=click.Choice(["on", "off", "eager", "chunked"]), default="on", show_default=True,
              help="Entropy in the update: on (torch.compile'd, verl's default), off, eager, chunked.")
@click.option("--temperature", type=click.FloatRange(min=1e-3), default=1.0, show_default=True)
@click.option("--ulysses-sp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Ulysses sequence parallel size: each rank holds tokens / SP.")
@click.option("--verl-version", default="0.9.1", show_default=True, help="verl release whose log-prob path is run.")
@click.option("--remove-padding/--no-remove-padding", default=True, show_default=True,
              help="Packed rows (use_remove_padding) or one padded row with a response slice.")
@click.option("--response-tokens", type=click.IntRange(min=1), default=None,
              help="Without remove padding: the response length (default: half the tokens).")
@click.option("--hidden", type=click.IntRange(min=1), default=None, help="Override the model's hidden size.")
@click.option("--intermediate", type=click.IntRange(min=1), default=None, help="Override the MLP width.")
@click.option("--heads", type=click.IntRange(min=1), default=None, help="Override the attention heads.")
@click.option("--kv-heads", type=click.IntRange(min=1), default=None, help="Override the KV heads.")
@click.option("--head-dim", type=click.IntRange(min=1), default=None, help="Override the head dimension.")
@click.option("--all", "measure_all", is_flag=True, help="Measure every coefficient of knowledge/memory_measured.yaml.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="With --all: the YAML file to write.")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def calibrate(model: str | None, model_config: str | None, tokens: int, phase: str | None, layers: str | None,
              vocab: str | None, token_pair: str | None, gradient_checkpointing: bool, lora_rank: int, entropy: str,
              temperature: float, ulysses_sp: int, verl_version: str, remove_padding: bool,
              response_tokens: int | None, hidden: int | None, intermediate: int | None,
              heads: int | None, kv_heads: int | None, head_dim: int | None, measure_all: bool, out: Path | None,
              fmt: str) -> None:
    """Measure activation and logit memory of verl's phases on a fake-tensor model (no GPU, no weights).

    Needs the [calibrate] extra (torch, transformers, peft). Exit 0: measured; 2: a missing package,
    an unknown model or bad options.
    """
    from advisor import calibrate as harness

    if harness.missing():
        raise ConfigError(f"advisor calibrate needs {', '.join(harness.missing())}",
                          suggestion=install_hint("calibrate"))
    if measure_all:
        harness.write_all(out or Path("knowledge/memory_measured.yaml"))
        return
    request = harness.build_request(
        model, model_config, tokens=tokens, phase=phase, layers=layers, vocab=vocab, token_pair=token_pair,
        shape=dict(hidden=hidden, intermediate=intermediate, heads=heads, kv_heads=kv_heads, head_dim=head_dim),
        switches=dict(gradient_checkpointing=gradient_checkpointing, lora_rank=lora_rank, entropy=entropy,
                      temperature=temperature, ulysses_sp=ulysses_sp, verl_version=verl_version,
                      remove_padding=remove_padding, response_tokens=response_tokens))
    slope = bool(layers and "," in layers) or bool(vocab and "," in vocab) or bool(token_pair)
    harness.run_command(request, all_phases=phase is None and not slope, fmt=fmt)

