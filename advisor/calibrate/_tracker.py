"""Bytes of live tensor storages, counted from aten ops under a ``TorchDispatchMode``.

Each storage an op returns is counted once when first seen and uncounted when Python drops it (a weak
reference's callback). Storages that existed before the tracker started (parameters, inputs) are the
baseline and never counted. Works on fake tensors (no memory is ever allocated) and on real ones.

The autograd-accumulation trap: for tensor subclasses, or any tensor while a Python dispatch mode is
active, autograd's engine sums two gradients for the same tensor out of place (``old + new``) where a
plain CUDA run sums them in place into the old buffer when nothing else holds it (``InputBuffer::
accumulate``, torch/csrc/autograd/input_buffer.cpp: ``can_accumulate_inplace`` is false for
``isTensorSubclassLike`` tensors). Left alone, one gradient buffer is over-counted at each accumulation
point. The correction: a post-hook on every node of the graph marks "the node's backward returned";
an ``aten.add.Tensor`` run after that mark and before the next node starts is the engine's
accumulation. Its result's bytes are held pending; if one of its two inputs is freed before the next
allocation (the engine dropped the old buffer: in place it would have been reused), the result takes
that storage's place and no bytes are added; otherwise the result is counted at the next event.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _storage_key(storage: Any) -> int:
    # one id per StorageImpl (the Python wrapper is preserved with it)
    return int(storage._cdata)


@dataclass
class _Pending:
    key: int
    nbytes: int
    inputs: tuple[int, ...]


class LiveBytes(TorchDispatchMode):
    """Live bytes of storages created by aten ops; ``peak`` is the maximum seen."""

    def __init__(self, baseline: list[torch.Tensor] | tuple[torch.Tensor, ...] = (),
                 *, correct_accumulation: bool = True) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.accumulations = 0  # accumulation adds seen in backward
        self.reused = 0  # of which emulated in place
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._sizes: dict[int, int] = {}
        self._baseline: set[int] = set()
        self._baseline_refs: list[Any] = []
        self._pending: _Pending | None = None
        self._after_node: Any = None
        self._correct = correct_accumulation
        self.add_baseline(baseline)

    # ------------------------------------------------------------------ bookkeeping
    def add_baseline(self, tensors: Any) -> None:
        """Storages that exist already (parameters, inputs, buffers): never counted."""
        for t in tensors:
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                self._baseline.add(_storage_key(st))
                self._baseline_refs.append(st)  # keep alive: a reused key would be mistaken for baseline

    def _flush(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._count(pending.key, pending.nbytes)

    def _count(self, key: int, nbytes: int) -> None:
        self.live += nbytes
        self.peak = max(self.peak, self.live)

    def _on_free(self, key: int) -> None:
        nbytes = self._sizes.pop(key, 0)
        self._refs.pop(key, None)
        pending = self._pending
        if pending is not None and key in pending.inputs:
            # in place, the engine would have written the sum into this buffer: the result takes its place
            self._pending = None
            self.reused += 1
            self.live -= nbytes
            self._count(pending.key, pending.nbytes)
            return
        if pending is not None and key == pending.key:
            self._pending = None
            return
        self.live -= nbytes

    def _track(self, storage: Any) -> tuple[int, int] | None:
        key = _storage_key(storage)
        if key in self._baseline or key in self._refs:
            return None
        nbytes = int(storage.nbytes())
        self._sizes[key] = nbytes
        def freed(_ref: weakref.ref[Any], k: int = key) -> None:
            self._on_free(k)

        self._refs[key] = weakref.ref(storage, freed)
        return key, nbytes

    # ------------------------------------------------------------------ autograd hooks
    def watch_graph(self, root: Any) -> None:
        """Mark, on every node under ``root`` (a grad_fn), when its backward has returned."""
        seen: set[int] = set()
        stack = [root]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            node.register_prehook(self._node_starts)
            node.register_hook(self._node_returned(node))
            stack.extend(fn for fn, _ in node.next_functions)

    def _node_starts(self, *_: Any) -> None:
        self._after_node = None

    def _node_returned(self, node: Any) -> Any:
        def hook(*_: Any) -> None:
            self._after_node = node
        return hook

    # ------------------------------------------------------------------ dispatch
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self._flush()
        out = func(*args, **(kwargs or {}))
        accumulation = (self._correct and func is torch.ops.aten.add.Tensor and self._after_node is not None
                        and torch._C._current_autograd_node() is self._after_node)
        new: list[tuple[int, int]] = []
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                tracked = self._track(t.untyped_storage())
                if tracked is not None:
                    new.append(tracked)
        if accumulation and len(new) == 1:
            self.accumulations += 1
            inputs = tuple(_storage_key(a.untyped_storage()) for a in args[:2] if isinstance(a, torch.Tensor))
            self._pending = _Pending(new[0][0], new[0][1], inputs)
        else:
            for key, nbytes in new:
                self._count(key, nbytes)
        return out

    def __exit__(self, *exc: Any) -> Any:
        self._flush()
        return super().__exit__(*exc)
