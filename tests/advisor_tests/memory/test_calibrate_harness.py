"""The GPU-free memory harness (advisor.calibrate) on tiny shapes.

Expected numbers come from counting, by hand, the tensors each op saves for backward (torch's
derivatives.yaml / autograd Function code, HF's Qwen2 modules, flash-attn's kernels) or from
torch.profiler's allocation events on real CPU tensors — never from the harness itself.
CI has no torch: the module skips, and test_memory_measured.py checks the committed numbers instead.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

for _name in ("torch", "transformers", "peft"):
    pytest.importorskip(_name, reason=f"{_name} not installed: the [calibrate] extra runs the harness "
                                      "(the committed measurements are checked by test_memory_measured.py)")

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from advisor.calibrate import Request, Switches, rank_tokens, run, verl_path  # noqa: E402
from advisor.calibrate._tracker import LiveBytes  # noqa: E402
from advisor.calibrate._verl_path import log_prob_path  # noqa: E402
from advisor.memory import resolve_model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

# A tiny dense Qwen2 shape: hidden 64, MLP 160, 4 heads of 16 (q width = hidden), 2 KV heads.
H, MLP, HEADS, KV_HEADS, HEAD_DIM = 64, 160, 4, 2, 16
KV = KV_HEADS * HEAD_DIM
TOKENS = 128


def _tiny(**changes):
    return Request("Qwen2.5-0.5B", TOKENS, hidden=H, intermediate=MLP, heads=HEADS, kv_heads=KV_HEADS,
                   head_dim=HEAD_DIM, **changes)


# ---------------------------------------------------------------------------------------------- tracker


class _RowSum(torch.autograd.Function):
    """[N, H] -> [N]; backward allocates one [N, H] gradient and nothing else."""

    @staticmethod
    def forward(ctx, h):
        ctx.shape = h.shape
        return h.new_empty(h.shape[0])

    @staticmethod
    def backward(ctx, g):
        return g.new_empty(ctx.shape)


def _two_consumers(x):
    h = x * 2
    a, b = _RowSum.apply(h), _RowSum.apply(h)
    del h
    return (a + b).sum()


def _profiler_peak(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = peak = 0
    for event in sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns()):
        if event.name() == "[memory]":
            live += event.nbytes()
            peak = max(peak, live)
    return peak


def _tracked_peak(fn_of_x, *, fake: bool, correct: bool = True, shape=(1000, 64)) -> tuple[int, LiveBytes]:
    mode = FakeTensorMode() if fake else contextlib.nullcontext()
    with mode:
        x = torch.zeros(*shape, requires_grad=True)
    tracker = LiveBytes([x], correct_accumulation=correct)
    with mode, tracker:
        loss = fn_of_x(x)
        tracker.watch_graph(loss.grad_fn)
        loss.backward()
        del loss
    return tracker.peak, tracker


@pytest.mark.parametrize("fake", [True, False], ids=["fake", "real"])
def test_accumulation_counted_in_place_like_a_plain_run(fake):
    # Two [1000, 64] fp32 gradients meet at h: a plain run sums them in place (2 buffers live, then
    # x's gradient replaces them); under a dispatch mode autograd adds out of place (3 buffers).
    buffer = 1000 * 64 * 4
    x = torch.zeros(1000, 64, requires_grad=True)  # outside the profiled region, like the tracker's baseline
    real = _profiler_peak(lambda: _two_consumers(x).backward())
    assert abs(real - 2 * buffer) < 64  # the profiler: two buffers (+ a few scalars)
    corrected, tracker = _tracked_peak(_two_consumers, fake=fake)
    raw, _ = _tracked_peak(_two_consumers, fake=fake, correct=False)
    assert tracker.accumulations == 1 and tracker.reused == 1
    assert abs(corrected - real) < 64
    assert raw - corrected == buffer  # uncorrected: exactly one gradient buffer over


def test_baseline_storages_are_not_counted():
    with FakeTensorMode() as mode:
        w = torch.zeros(256, 256)
    tracker = LiveBytes([w])
    with mode, tracker:
        w.t()  # a view of the parameter: same storage, nothing allocated
        y = w * 2
        assert tracker.live == 256 * 256 * 4
        del y
    assert tracker.live == 0 and tracker.peak == 256 * 256 * 4


# ---------------------------------------------------------------------------------------------- logits


def _logit_graph_peak(n, vocab, version, entropy, temperature=1.0, *, fake=True):
    """lm_head -> verl's log-prob path -> loss -> backward, on a [n, 8] bf16 hidden state."""
    path = verl_path(version)

    def body(h, w):
        logits = (h @ w.t()).unsqueeze(0)
        log_probs, ent = log_prob_path(logits, torch.zeros(n, dtype=torch.long), path, entropy=entropy,
                                       temperature=temperature)
        del logits
        loss = -log_probs.float().mean()
        return loss - 1e-3 * ent.float().mean() if ent is not None else loss

    if not fake:
        h = torch.zeros(n, 8, dtype=torch.bfloat16, requires_grad=True)
        w = torch.zeros(vocab, 8, dtype=torch.bfloat16)
        return _profiler_peak(lambda: body(h, w).backward())
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        h = torch.zeros(n, 8, dtype=torch.bfloat16, requires_grad=True)
        w = torch.zeros(vocab, 8, dtype=torch.bfloat16)
    tracker = LiveBytes([h, w])
    with mode, tracker:
        loss = body(h, w)
        tracker.watch_graph(loss.grad_fn)
        loss.backward()
        del loss
    return tracker.peak


def _per_logit(version, entropy, temperature=1.0, *, fake=True, n=256):
    low, high = (_logit_graph_peak(n, v, version, entropy, temperature, fake=fake) for v in (1024, 2048))
    return (high - low) / (n * 1024)


# Buffers of [tokens x vocab] bf16 (2 B each) at the backward peak, counted by hand:
# - in-place temperature divide on the squeeze(0) view (verl < 0.9): CopySlices::apply holds the incoming
#   gradient, its copy `result`, the contiguous clone of the slice and the divide's backward output
#   (torch/csrc/autograd/functions/tensor.cpp) -> 4 buffers = 8 B, with entropy or without;
# - out-of-place divide (0.9.0; 0.9.1 at temperature != 1), entropy off: the cross entropy's in-place
#   gradient (flash-attn inplace_backward) + the divide's backward output -> 2 buffers = 4 B;
# - entropy on (compiled), out of place: the logits + the cross-entropy and entropy gradients -> 6 B;
# - 0.9.1 at temperature 1, entropy off: the logits, overwritten by their own gradient -> 2 B.
LOGIT_CASES = [("0.3.0", "off", 1.0, 8), ("0.7.1", "on", 1.0, 8), ("0.7.1", "off", 1.0, 8), ("0.8.0", "off", 1.0, 8),
               ("0.9.0", "off", 1.0, 4), ("0.9.0", "on", 1.0, 6), ("0.9.1", "off", 1.0, 2),
               ("0.9.1", "on", 1.0, 6), ("0.9.1", "off", 0.7, 4)]


@pytest.mark.parametrize(("version", "entropy", "temperature", "expected"), LOGIT_CASES)
def test_update_bytes_per_logit_per_verl_path(version, entropy, temperature, expected):
    assert _per_logit(version, entropy, temperature) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(("version", "entropy", "expected"), [("0.7.1", "on", 8), ("0.7.1", "off", 8),
                                                              ("0.9.0", "off", 4), ("0.9.1", "on", 6)])
def test_profiler_on_real_tensors_agrees(version, entropy, expected):
    # The same graph on real CPU tensors, no dispatch mode: torch.profiler's allocation events. (Cases whose
    # peak is the lm_head's backward matmul are left out: the CPU gemm's own workspace shows there.)
    assert _per_logit(version, entropy, fake=False) == pytest.approx(expected, abs=0.05)


def test_model_logit_slope_matches_the_logit_graph():
    # The whole model (embeddings frozen) gives the same 8 B per logit as the bare graph on verl 0.7.1.
    result = run(_tiny(vocab=(2048, 4096), layers=(1,), switches=Switches(verl_version="0.7.1", entropy="off")))
    assert result["bytes_per_logit"] == pytest.approx(8.0, abs=0.01)


@pytest.mark.parametrize("version", ["0.7.1", "0.9.1"])
def test_padded_path_bytes_per_logit_without_entropy(version):
    # Without remove padding, per padded logit, response = half the row. verl < 0.9: div_ on the output itself
    # (a base: no CopySlices), the slice's reshape copies the response half (CE writes its gradient there in
    # place); backward: that gradient (1/2) + SliceBackward's zero-filled full gradient (1) = 3/2 buffers, then
    # the divide's gradient beside the full one: 2 buffers = 4 B. verl 0.9.1: the concatenated rows (a copy, 1)
    # beside the logits; backward: the copy's gradient + unbind's stacked gradient: 2 buffers = 4 B.
    result = run(_tiny(vocab=(4096, 8192), layers=(1,),
                       switches=Switches(verl_version=version, entropy="off", remove_padding=False)))
    assert result["bytes_per_logit"] == pytest.approx(4.0, abs=0.01)


@pytest.mark.parametrize(("version", "temperature", "expected"), [("0.7.1", 1.0, 2), ("0.9.0", 1.0, 4),
                                                                  ("0.9.1", 1.0, 2), ("0.9.1", 0.7, 4)])
def test_log_prob_forward_bytes_per_logit(version, temperature, expected):
    # No grad: the logits (2 B), plus the divided copy while verl's `output` still holds the original (0.9.0,
    # and 0.9.1 at temperature != 1); the compiled entropy keeps no [tokens x vocab] temporary.
    result = run(_tiny(vocab=(4096, 8192), layers=(1,), phase="log_prob",
                       switches=Switches(verl_version=version, temperature=temperature)))
    assert result["bytes_per_logit"] == pytest.approx(expected, abs=0.01)


# ---------------------------------------------------------------------------------------------- activations


def _full_ft_layer_bytes(h, kv, inter, heads):
    """Bytes per token per decoder layer saved for backward by HF Qwen2 + flash-attn varlen, full fine-tune:
    each RMSNorm: fp32 input copy (4h, pow and mul), rsqrt [.,1] fp32 (4), bf16 cast (2h, weight mul),
      bf16 output (2h, the next linear)                                            -> 2 x (8h + 4)
    attention: contiguous q, k (2h + 2kv, HF's flash path), v (2kv), out (2h), softmax_lse fp32 (4 heads)
    MLP: gate output (2I, SiLU), SiLU output and up output (4I, the product), product (2I, down_proj)."""
    return 2 * (8 * h + 4) + (4 * h + 4 * kv + 4 * heads) + 8 * inter


def test_activation_bytes_per_token_per_layer_full_finetune():
    result = run(_tiny(layers=(1, 3), vocab=(256,)))
    assert result["bytes_per_token_layer"] == _full_ft_layer_bytes(H, KV, MLP, HEADS)


@pytest.mark.parametrize("rank", [8, 16])
def test_lora_activation_bytes(rank):
    # LoRA freezes the norm weights: their mul no longer saves the bf16 cast (-2h per norm, x 2); each of the
    # 7 all-linear adapters saves lora_A's output for lora_B (2r). lora_A's input is the base input, saved anyway.
    result = run(_tiny(layers=(1, 3), vocab=(256,), switches=Switches(lora_rank=rank)))
    assert result["bytes_per_token_layer"] == _full_ft_layer_bytes(H, KV, MLP, HEADS) - 4 * H + 7 * 2 * rank


@pytest.mark.parametrize("lora_rank", [0, 8])
def test_gradient_checkpointing_keeps_each_layer_input(lora_rank):
    # non-reentrant checkpointing keeps each layer's bf16 input (2h) and recomputes the rest
    result = run(_tiny(layers=(1, 3), vocab=(256,),
                       switches=Switches(gradient_checkpointing=True, lora_rank=lora_rank)))
    assert result["bytes_per_token_layer"] == 2 * H


def test_critic_update_saves_what_the_actor_backbone_saves():
    result = run(_tiny(layers=(1, 3), vocab=(256,), phase="critic_update"))
    assert result["bytes_per_token_layer"] == _full_ft_layer_bytes(H, KV, MLP, HEADS)


def test_forward_without_grad_holds_no_layer_activations():
    # no grad: nothing is saved per layer, so depth adds nothing to the peak (from layer 2 on: HF's model
    # loop keeps `inputs_embeds` alive beside the residual stream once they differ, one [tokens, h] step)
    result = run(_tiny(layers=(2, 4), vocab=(256,), phase="log_prob"))
    assert result["bytes_per_token_layer"] == 0


def test_ulysses_sp_measures_the_rank_share():
    assert rank_tokens(1001, 2) == 501
    sp = run(_tiny(layers=(2,), vocab=(256,), switches=Switches(ulysses_sp=2)))
    half = run(replace(_tiny(layers=(2,), vocab=(256,)), tokens=TOKENS // 2))
    assert sp["tokens_per_rank"] == TOKENS // 2 and sp["peak_bytes"] == half["peak_bytes"]


def test_catalog_model_is_built_from_its_dimensions():
    # Qwen2.5-7B's own shapes, 1 and 2 layers: the per-layer bytes follow the hand formula at full width
    spec = resolve_model(model="Qwen2.5-7B")
    result = run(Request("Qwen2.5-7B", 64, layers=(1, 2), vocab=(256,)))
    expected = _full_ft_layer_bytes(spec.hidden, spec.kv_heads * spec.head_dim, spec.intermediate, spec.heads)
    assert result["bytes_per_token_layer"] == expected


def test_request_command_repeats_the_measurement():
    request = _tiny(layers=(1, 3), vocab=(256,), switches=Switches(lora_rank=8, gradient_checkpointing=True))
    command = request.command()
    assert command.startswith("advisor calibrate Qwen2.5-0.5B --tokens 128 --phase update")
    for part in ("--layers 1,3", "--vocab 256", "--lora-rank 8", "--gradient-checkpointing", "--hidden 64"):
        assert part in command


def test_cli_measures_and_prints_the_command(tmp_path):
    from click.testing import CliRunner

    from advisor.cli import app

    args = ["calibrate", "Qwen2.5-0.5B", "--tokens", "64", "--layers", "1,2", "--vocab", "256", "--hidden", "64",
            "--intermediate", "160", "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output[result.output.index("{"):])
    assert data["results"]["update"]["bytes_per_token_layer"] == _full_ft_layer_bytes(H, KV, MLP, HEADS)
    assert data["command"].startswith("advisor calibrate Qwen2.5-0.5B --tokens 64")


def test_cli_rejects_a_moe_model_in_one_line():
    from click.testing import CliRunner

    from advisor.cli import app

    result = CliRunner().invoke(app, ["calibrate", "Qwen3-30B-A3B", "--phase", "update"])
    assert result.exit_code == 2
    assert "dense" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_gpu_calibration_script_dry_run_writes_its_data(tmp_path):
    # bench/gpu_memory_calibration.py on CPU, a tiny shape, a 3 s budget: at least one case, tracker == harness
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[3]
    out = tmp_path / "gpu.yaml"
    subprocess.run([sys.executable, str(repo / "bench" / "gpu_memory_calibration.py"), "--dry-run", "--budget-s", "3",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    data = yaml.safe_load(out.read_text())
    assert data["command"] and data["torch"] and data["cases"]
    for case in data["cases"]:
        assert case["tracker_peak"] == case["harness_peak"], case["case"]
