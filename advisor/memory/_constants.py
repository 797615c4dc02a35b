"""The memory model's constants, read from knowledge/memory.yaml (each with its source there)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath
from typing import Any

from advisor.datafiles import load_knowledge

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class DatasetLengths:
    """Typical real token counts of one dataset's prompts and responses."""

    match: str
    prompt_tokens: int
    response_tokens: int
    source: str


@dataclass(frozen=True)
class MemoryConstants:
    ok_below: float
    oom_above: float
    dtype_bytes: dict[str, int]
    adam_states_per_param: int
    megatron_weight_bytes: int
    megatron_grad_bytes: int
    megatron_optimizer_bytes: int
    fsdp_live_layer_units: int
    fsdp2_transient_factor: float
    act_hidden_coeff: int
    act_kv_coeff: int
    act_mlp_coeff: int
    act_lora_hidden_coeff: int
    act_lora_rank_coeff: int
    checkpoint_bytes_per_hidden: int
    recomputed_layers: int
    forward_live_layers: int
    forward_mlp_coeff: int
    forward_hidden_coeff: int
    logit_bytes: int
    logit_grad_bytes: int
    eager_entropy_extra_bytes: int
    eager_entropy_forward_extra_bytes: int
    chunked_entropy_forward_extra_bytes: int
    chunked_entropy_update_extra_bytes: int
    legacy_entropy_backward_bytes: int
    temperature_copy_bytes: int
    padded_update_bytes: dict[str, float]  # per padded logit: legacy_off/legacy_on/off/on, response_share
    entropy_chunk_rows: int
    fused_chunk_rows: int
    vllm_non_torch_gib: float
    profile_sampler_bytes_per_logit: int
    cuda_graph_gib_max: float
    cuda_graph_gib_min: float
    cuda_graph_full_capture_size: int
    default_bucket_megabytes: int
    train_process_gib: float
    generate_thin_margin_gib: float
    nccl_gib_two: float
    nccl_gib_more: float
    nvls_gib: float  # NVLS buffers per communicator of more than 2 GPUs on the GPUs below
    nvls_gpus: tuple[str, ...]
    lora_sp_residual_gib: tuple[float, float]  # (smallest, largest) seen; see knowledge/memory.yaml residuals
    host_worker_baseline_gib: float  # fitted: knowledge/memory.yaml host.worker_baseline_source
    host_vllm_v0_swap_gib: float
    datasets: tuple[DatasetLengths, ...]
    fix_costs: dict[str, float]

    def bytes_of(self, dtype: Any, default: int = 4) -> int:
        """Bytes per element of a verl dtype string (fp32, bf16, ...); None -> ``default``."""
        if dtype is None:
            return default
        return self.dtype_bytes.get(str(dtype).lower(), default)

    def forward_entropy_extra_bytes(self, chunking: bool) -> int:
        """Bytes per logit an eager entropy adds to a forward without grad (per logit of one chunk if chunked)."""
        return self.chunked_entropy_forward_extra_bytes if chunking else self.eager_entropy_forward_extra_bytes

    def shortest_known_lengths(self, train_files: Any) -> DatasetLengths | None:
        """The shortest typical lengths among the known datasets in ``data.train_files`` (a mix's floor)."""
        files = train_files if isinstance(train_files, (list, tuple)) else [train_files]
        found = [self.dataset_lengths(file) for file in files if file]
        known = [d for d in found if d is not None]
        return min(known, key=lambda d: d.prompt_tokens + d.response_tokens) if known else None

    def dataset_lengths(self, train_files: Any) -> DatasetLengths | None:
        """The longest typical lengths among the known datasets in ``data.train_files`` (None if any is unknown)."""
        files = train_files if isinstance(train_files, (list, tuple)) else [train_files]
        found: list[DatasetLengths] = []
        for file in files:
            if not file:
                return None
            base = PurePosixPath(str(file)).parent.name + "/" + PurePosixPath(str(file)).name
            match = next((d for d in self.datasets if d.match in base.lower()), None)
            if match is None:
                return None
            found.append(match)
        if not found:
            return None
        return max(found, key=lambda d: d.prompt_tokens + d.response_tokens)


@cache
def constants() -> MemoryConstants:
    """The memory model's constants (cached)."""
    data = load_knowledge("memory.yaml")
    act = data["activations"]
    logits = data["logits"]
    inference = data["inference"]
    optimizer = data["optimizer"]
    return MemoryConstants(
        ok_below=float(data["risk"]["ok_below"]),
        oom_above=float(data["risk"]["oom_above"]),
        dtype_bytes={str(k): int(v) for k, v in data["dtype_bytes"].items()},
        adam_states_per_param=int(optimizer["adam_states_per_param"]),
        megatron_weight_bytes=int(optimizer["megatron_weight_bytes"]),
        megatron_grad_bytes=int(optimizer["megatron_grad_bytes"]),
        megatron_optimizer_bytes=int(optimizer["megatron_optimizer_bytes"]),
        fsdp_live_layer_units=int(data["fsdp"]["live_layer_units"]),
        fsdp2_transient_factor=float(data["fsdp"]["fsdp2_transient_factor"]),
        act_hidden_coeff=int(act["hidden_coeff"]),
        act_kv_coeff=int(act["kv_coeff"]),
        act_mlp_coeff=int(act["mlp_coeff"]),
        act_lora_hidden_coeff=int(act["lora_hidden_coeff"]),
        act_lora_rank_coeff=int(act["lora_rank_coeff"]),
        checkpoint_bytes_per_hidden=int(act["checkpoint_bytes_per_hidden"]),
        recomputed_layers=int(act["recomputed_layers"]),
        forward_live_layers=int(act["forward_live_layers"]),
        forward_mlp_coeff=int(act["forward_mlp_coeff"]),
        forward_hidden_coeff=int(act["forward_hidden_coeff"]),
        logit_bytes=int(logits["logit_bytes"]),
        logit_grad_bytes=int(logits["logit_grad_bytes"]),
        eager_entropy_extra_bytes=int(logits["eager_entropy_extra_bytes"]),
        eager_entropy_forward_extra_bytes=int(logits["eager_entropy_forward_extra_bytes"]),
        chunked_entropy_forward_extra_bytes=int(logits["chunked_entropy_forward_extra_bytes"]),
        chunked_entropy_update_extra_bytes=int(logits["chunked_entropy_update_extra_bytes"]),
        legacy_entropy_backward_bytes=int(logits["legacy_entropy_backward_bytes"]),
        temperature_copy_bytes=int(logits["temperature_copy_bytes"]),
        padded_update_bytes={k: float(logits[f"padded_update_bytes_{k}"])
                             for k in ("legacy_off", "legacy_on", "off", "on")}
        | {"response_share": float(logits["padded_measured_response_share"])},
        entropy_chunk_rows=int(logits["entropy_chunk_rows"]),
        fused_chunk_rows=int(logits["fused_chunk_rows"]),
        vllm_non_torch_gib=float(inference["vllm_non_torch_gib"]),
        profile_sampler_bytes_per_logit=int(inference["profile_sampler_bytes_per_logit"]),
        cuda_graph_gib_max=float(inference["cuda_graph_gib_max"]),
        cuda_graph_gib_min=float(inference["cuda_graph_gib_min"]),
        cuda_graph_full_capture_size=int(inference["cuda_graph_full_capture_size"]),
        default_bucket_megabytes=int(inference["default_bucket_megabytes"]),
        train_process_gib=float(data["overhead"]["train_process_gib"]),
        generate_thin_margin_gib=float(data["generate"]["thin_margin_gib"]),
        nccl_gib_two=float(data["nccl"]["per_communicator_mib_2gpu"]) / 1024,
        nccl_gib_more=float(data["nccl"]["per_communicator_mib_more"]) / 1024,
        nvls_gib=float(data["nccl"]["nvls_per_rank_mib"]) / 1024,
        nvls_gpus=tuple(data["nccl"]["nvls_gpus"]),
        lora_sp_residual_gib=(min(float(p["gib"]) for p in data["residuals"]["multi_gpu_lora_sp"]["seen"]),
                              max(float(p["gib"]) for p in data["residuals"]["multi_gpu_lora_sp"]["seen"])),
        host_worker_baseline_gib=float(data["host"]["worker_baseline_gib"]),
        host_vllm_v0_swap_gib=float(data["host"]["vllm_v0_swap_space_gib"]),
        datasets=tuple(
            DatasetLengths(
                match=str(d["match"]).lower(),
                prompt_tokens=int(d["prompt_tokens"]),
                response_tokens=int(d["response_tokens"]),
                source=" ".join(str(d.get("source", "")).split()),
            )
            for d in data["sequences"]["datasets"]
        ),
        fix_costs={str(k): float(v) for k, v in data["fix_costs"].items() if k != "source"},
    )
