"""Host RAM per node: the peak the node must hold, and what verl's own ``perf/cpu_memory_used_gb`` reads.

Every term and its source in verl's (or vLLM's) code is in knowledge/memory.yaml ``host``. Two numbers:

- ``peak_gib``, for the risk: every process's resident baseline, plus everything verl and vLLM keep in host memory
  at once (offloaded shards, the CPU-offloaded reference, the sleeping engine's weight copy, vLLM V0's swap
  space), plus the larger of the start-up checkpoint load and the checkpoint save's shard copies;
- ``sampled_gib``: the node's ``psutil.virtual_memory().used`` at the moment verl samples it (inside
  update_actor): the per-worker baseline and pageable terms only. Every term above is pinned (cudaHostAlloc'd
  through torch or vLLM), and pinned pages are not in ``used`` (knowledge/memory.yaml host: the published
  points' evidence).
"""

from __future__ import annotations

from advisor.plural import counted

from ._constants import GIB, MemoryConstants
from ._models import ModelSpec, total_params
from ._pool import EnginePool
from ._results import HostEstimate
from ._terms import Sizes
from ._workload import Workload


def _offloaded(work: Workload, model: ModelSpec, sizes: Sizes, c_sizes: Sizes | None) -> list[tuple[str, float]]:
    """Training state verl keeps in (pinned) host memory per node, in bytes."""
    g = work.topology.gpus_per_node
    items: list[tuple[str, float]] = []
    if work.actor.param_offload or work.actor.offload_policy:
        items.append(("actor parameters offloaded", g * sizes.params))
    if work.actor.optimizer_offload or work.actor.offload_policy:
        items.append(("actor Adam states offloaded", g * sizes.optimizer))
    if work.actor.offload_policy:
        items.append(("actor gradients (FSDP2 offload_policy)", g * sizes.grads))
    if work.topology.backend == "megatron":
        if work.actor.grad_offload:
            items.append(("actor gradient buffer offloaded", g * sizes.grads))
        if sizes.optimizer_on_cpu:
            items.append(("Megatron hybrid CPU optimizer share", g * sizes.optimizer_on_cpu))
    if work.ref.used and not work.ref.in_actor:
        if work.topology.backend == "megatron":
            if work.ref.param_offload:
                items.append(("reference model offloaded", g * sizes.params))
        else:
            items.append(("reference model (FSDP CPUOffload)",
                          g * work.ref.dtype_bytes * total_params(model) / work.topology.fsdp_shard))
    if c_sizes is not None:
        if work.critic.param_offload or work.critic.offload_policy:
            items.append(("critic parameters offloaded", g * c_sizes.params))
        if work.critic.optimizer_offload or work.critic.offload_policy:
            items.append(("critic Adam states offloaded", g * c_sizes.optimizer))
        if work.critic.offload_policy:
            items.append(("critic gradients (FSDP2 offload_policy)", g * c_sizes.grads))
    return items


def _engine(work: Workload, pool: EnginePool | None, consts: MemoryConstants) -> list[tuple[str, float]]:
    """What the sleeping inference engine keeps in host memory per node, in bytes."""
    g = work.topology.gpus_per_node
    items: list[tuple[str, float]] = []
    if work.topology.colocated and work.rollout.host_weight_copy and pool is not None and pool.weights:
        items.append(("vLLM level-1 sleep: engine weights copied to host", g * pool.weights))
    if work.rollout.swap_gib > 0:
        items.append((f"vLLM V0 swap space ({work.rollout.swap_gib:g} GiB per worker; none under V1)",
                      g * work.rollout.swap_gib * GIB))
    return items


def host_estimate(work: Workload, model: ModelSpec, sizes: Sizes, c_sizes: Sizes | None, pool: EnginePool | None,
                  capacity_gib: float | None, consts: MemoryConstants) -> HostEstimate:
    """Host RAM per node (GiB): the peak with its parts, and verl's sampled ``used`` with its parts."""
    g = work.topology.gpus_per_node
    baseline = ("per-worker process baseline "
                f"({counted(g, 'worker')} x {consts.host_worker_baseline_gib:g} GiB, fitted on published runs)",
                g * consts.host_worker_baseline_gib * GIB)
    steady = _offloaded(work, model, sizes, c_sizes) + _engine(work, pool, consts)
    # start-up: rank 0 of each node (every rank for tied embeddings) loads the whole checkpoint
    loaders = g if model.tie_embeddings else 1
    dtype = work.actor.dtype_bytes if work.topology.backend == "fsdp" else 2
    init = loaders * dtype * total_params(model)
    load = f"checkpoint load at start-up ({counted(loaders, 'rank')} x full model)"
    transients: list[tuple[str, float]] = [(load, init)]
    saved = 0.0
    if work.actor.checkpoint_save:
        saved = g * (sizes.params + sizes.optimizer)
        if c_sizes is not None:
            saved += g * (c_sizes.params + c_sizes.optimizer)
        transients.append(("checkpoint save, shards copied to host (trainer.save_freq)", saved))
    during_run = sum(b for _, b in steady) + saved
    peak = (baseline[1] + max(init, during_run)) / GIB
    risk = None
    if capacity_gib:
        fraction = peak / capacity_gib
        risk = "oom" if fraction > consts.oom_above else "tight" if fraction >= consts.ok_below else "ok"
    details = tuple((label, b / GIB) for label, b in [baseline, *steady, *transients])
    return HostEstimate(peak, capacity_gib, risk, details, sampled_gib=baseline[1] / GIB,
                        sampled_details=((baseline[0], baseline[1] / GIB),))
