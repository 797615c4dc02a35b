"""Calibrate the GPU-free memory harness against a real GPU (issue 19, item 7): one run, at most ~10 min.

Runs real actor updates (and log-prob forwards) of a small Qwen2.5 built from its catalog shape with small
random weights (no download) on one CUDA GPU — LoRA and full fine-tune, gradient checkpointing on and off,
entropy on and off, the in-place (verl < 0.9) and out-of-place (0.9.1) temperature paths, several token
counts — and records, at each phase's peak:

- ``torch.cuda.max_memory_allocated`` above what was allocated before the phase (the allocator's peak),
- ``torch.cuda.memory_stats()`` (allocated/reserved/active peaks, alloc retries, OOMs),
- ``torch.cuda.mem_get_info()`` right after the phase (free, total: what the driver saw),
- the tracker's peak on the same real CUDA tensors, and the harness's fake-tensor peak of the same shape,
- for the first case of each kind, a memory snapshot (``torch.cuda.memory._snapshot()``, a pickle) that
  shows every live block at the peak (open with https://pytorch.org/memory_viz).

Two kernel sets: ``standin`` runs the harness's own autograd stand-ins on CUDA (checks the bookkeeping:
tracker == allocator), ``real`` swaps in the kernels verl runs where this machine has them — flash-attn's
Triton cross entropy (``flash_attn.ops.triton.cross_entropy``), ``torch.compile(entropy_from_logits)`` and
HF's ``sdpa`` attention (flash-attn varlen if installed) — which checks the stand-ins' assumptions.

    python bench/gpu_memory_calibration.py --out $OUT/gpu_memory_calibration.yaml      # on the GPU
    python bench/gpu_memory_calibration.py --dry-run                                   # CPU, tiny shape

Writes YAML (data, with the command, versions and date); prints one line per case:
``case  tokens  allocator_GiB  harness_GiB  harness/allocator``.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import pickle
import platform
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GIB = 1024**3


def _cases(dry_run: bool) -> list[dict[str, Any]]:
    tokens = (256, 512) if dry_run else (2048, 8192)
    grid = itertools.product((0, 32), (False, True), ("on", "off"), ("0.7.1", "0.9.1"))
    cases = [{"lora_rank": lora, "gradient_checkpointing": gc, "entropy": ent, "verl_version": ver, "phase": "update"}
             for lora, gc, ent, ver in grid]
    cases += [{"lora_rank": 0, "gradient_checkpointing": False, "entropy": "on", "verl_version": ver,
               "phase": "log_prob"} for ver in ("0.7.1", "0.9.1")]
    return [{**case, "tokens": n} for case in cases for n in tokens]


def _name(case: dict[str, Any]) -> str:
    tuning = f"lora{case['lora_rank']}" if case["lora_rank"] else "full"
    parts = [case["phase"], f"v{case['verl_version']}", tuning, "gc" if case["gradient_checkpointing"] else "nogc",
             f"entropy-{case['entropy']}"]
    return ".".join(parts)


def _use_real_kernels() -> dict[str, str]:
    """Swap the harness's stand-ins for the kernels verl runs, where importable; say which were swapped."""
    import torch

    from advisor.calibrate import _model, _verl_path

    used = {"attention": "sdpa", "cross_entropy": "standin", "entropy": "standin"}
    _model.ATTENTION = "sdpa"
    try:
        import flash_attn  # noqa: F401

        _model.ATTENTION = "flash_attention_2"
        used["attention"] = "flash_attention_2"
    except ImportError:
        pass
    try:
        from flash_attn.ops.triton.cross_entropy import cross_entropy_loss

        class _FlashCE:
            @staticmethod
            def apply(logits: Any, labels: Any, inplace_backward: bool) -> Any:
                return cross_entropy_loss(logits, labels, inplace_backward=inplace_backward)[0]

        _verl_path.FlashCrossEntropy = _FlashCE
        used["cross_entropy"] = "flash_attn.ops.triton.cross_entropy"
    except ImportError:
        pass

    def entropy_from_logits(logits: Any) -> Any:  # verl/utils/torch_functional.py:231-245 @0.9.1
        pd = torch.nn.functional.softmax(logits, dim=-1)
        return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)

    compiled = torch.compile(entropy_from_logits, dynamic=True)

    class _CompiledEntropy:
        @staticmethod
        def apply(logits: Any) -> Any:
            return compiled(logits)

    _verl_path.CompiledEntropy = _CompiledEntropy
    used["entropy"] = "torch.compile(entropy_from_logits)"
    return used


def _stats() -> dict[str, int]:
    import torch

    stats = torch.cuda.memory_stats()
    keys = ("allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak", "num_alloc_retries",
            "num_ooms", "allocation.all.peak")
    return {k: int(stats.get(k, 0)) for k in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, a tiny shape, no CUDA statistics")
    parser.add_argument("--model", default="Qwen2.5-0.5B", help="catalog model whose shape is built")
    parser.add_argument("--kernels", choices=["standin", "real", "both"], default="both")
    parser.add_argument("--out", type=Path, default=Path("gpu_memory_calibration.yaml"))
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop starting new cases after this")
    parser.add_argument("--snapshots", type=int, default=4, help="memory snapshots to keep (first cases)")
    args = parser.parse_args()

    import torch
    import yaml

    from advisor.calibrate import Shape, Switches, measure_phase, measure_phase_on, versions
    from advisor.memory import resolve_model

    device = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_memory_calibration: no CUDA device (use --dry-run on CPU)", file=sys.stderr)
        return 2
    spec = resolve_model(model=args.model)
    if args.dry_run:
        spec = replace(spec, hidden=64, intermediate=160, heads=4, kv_heads=2, head_dim=16, vocab=2048, layers=2)
    kernel_sets = ["standin", "real"] if args.kernels == "both" else [args.kernels]
    if args.dry_run:
        kernel_sets = ["standin"]  # the real kernels need CUDA (flash-attn's Triton, Inductor)
    harness_cache: dict[tuple[str, int], int] = {}
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    snapshots_left = 0 if args.dry_run else args.snapshots
    out_dir = args.out.parent
    for kernels in kernel_sets:
        used = _use_real_kernels() if kernels == "real" and not args.dry_run else {"all": "harness stand-ins"}
        for case in _cases(args.dry_run):
            if time.monotonic() - started > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: stopping before {_name(case)}", file=sys.stderr)
                break
            switches = Switches(gradient_checkpointing=case["gradient_checkpointing"], lora_rank=case["lora_rank"],
                                entropy=case["entropy"], verl_version=case["verl_version"])
            shape = Shape(spec, case["tokens"])
            row: dict[str, Any] = {"case": _name(case), "kernels": kernels, **case}
            t0 = time.monotonic()
            try:
                if snapshots_left:
                    torch.cuda.memory._record_memory_history(max_entries=200_000)
                real = measure_phase_on(shape, switches, case["phase"], device, track=kernels == "standin")
                if snapshots_left:
                    snap = out_dir / "snapshots" / f"{kernels}.{_name(case)}.{case['tokens']}.pickle"
                    snap.parent.mkdir(parents=True, exist_ok=True)
                    snap.write_bytes(pickle.dumps(torch.cuda.memory._snapshot()))
                    torch.cuda.memory._record_memory_history(enabled=None)
                    row["snapshot"] = str(snap.relative_to(out_dir))
                    snapshots_left -= 1
                row.update(real)
                if not args.dry_run:
                    row["memory_stats"] = _stats()
                    free, total = torch.cuda.mem_get_info()
                    row["mem_get_info_after"] = {"free": int(free), "total": int(total)}
                    torch.cuda.empty_cache()
                key = (_name(case), case["tokens"])
                if key not in harness_cache:  # the same fake run serves both kernel sets
                    harness_cache[key] = measure_phase(shape, switches, case["phase"])
                row["harness_peak"] = harness_cache[key]
            except Exception as err:  # keep going: one case's failure is data too
                row["error"] = " ".join(f"{type(err).__name__}: {err}".split())[:300]
            row["seconds"] = round(time.monotonic() - t0, 2)
            measured = row.get("allocator_peak", row.get("tracker_peak"))
            if measured and row.get("harness_peak"):
                row["harness_over_measured"] = round(row["harness_peak"] / measured, 4)
                print(f"{kernels:<8} {row['case']:<48} {case['tokens']:>6} {measured / GIB:8.3f} "
                      f"{row['harness_peak'] / GIB:8.3f} {row['harness_over_measured']:7.3f}")
            else:
                print(f"{kernels:<8} {row['case']:<48} {case['tokens']:>6} {row.get('error', 'no measurement')}")
            rows.append(row)
        if kernels == "real":
            rows.append({"kernels_used": used})
    data = {
        "schema": 1,
        "command": shlex.join([sys.executable.rsplit("/", 1)[-1], *sys.argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if not args.dry_run else f"cpu ({platform.processor() or 'dry run'})",
        "cuda": torch.version.cuda,
        **versions(),
        "model_shape": {"name": spec.name, "layers": spec.layers, "hidden": spec.hidden,
                        "intermediate": spec.intermediate, "heads": spec.heads, "kv_heads": spec.kv_heads,
                        "head_dim": spec.head_dim, "vocab": spec.vocab},
        "how": "advisor.calibrate on real tensors (measure_phase_on) vs the fake-tensor harness (measure_phase), "
               "random bf16 weights, one micro batch of packed rows per case; peaks are above the memory allocated "
               "before the phase (parameters and inputs)",
        "cases": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(yaml.safe_dump(data, sort_keys=False, width=200), encoding="utf-8")
    print(f"wrote {len(rows)} rows to {args.out} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
