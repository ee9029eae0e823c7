"""Arrays a hot loop reuses from call to call, one set per thread.

A local curate run maps every block above 128 kB afresh (pipelines/beam/allocator.py), so
an array allocated per page or per batch is faulted in again each time: the sequence nets'
forward pass took 843 faults a page that way (experiments/page-faults/). A
:class:`ThreadArrays` hands out contiguous views of arrays kept per thread (threads may
share one model or hasher), grown when a call needs more; it pickles empty (with a DoFn).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np


class ThreadArrays:
    def __init__(self) -> None:
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._local = threading.local()

    def view(self, name: str, shape: tuple[int, ...], dtype: Any, reserve: int = 0) -> np.ndarray:
        """A contiguous ``shape`` array of ``dtype`` over this thread's ``name`` array, which
        is reallocated (to at least ``reserve`` elements) when it is too small."""
        size = math.prod(shape)
        kept = self._local.__dict__
        flat = kept.get(name)
        if flat is None or flat.size < size or flat.dtype != dtype:
            flat = kept[name] = np.empty(max(size, reserve), dtype=dtype)
        return flat[:size].reshape(shape)
