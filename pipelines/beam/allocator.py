"""Memory that goes back to the system when a local run frees it.

A local run's processes (the launcher and Beam's worker processes) each handle one stage's
input at a time, a few to a few hundred MB of encoded elements, and free it when the stage
ends. With glibc's default allocator much of that freed memory stays with the process: the
threshold above which a block gets its own mapping rises after every large free (up to 32
MB), so later large blocks come from the heap, whose freed middle is never returned, and
each thread may get an arena of its own. The processes then grow with the largest stage
input they have seen, that is with the corpus. Measured with ``afm bench curate_memory``
(docs/curation.md): with the launcher's settings below in every process, 20,000 -> 100,000
documents cost 1.15x the memory instead of 1.53x when issue 44 closed (1.08x and 1.17x in two
runs on 2026-12-07 with the workers' settings below, once dedup's rejects no longer crossed the launcher with
their texts).

Within :func:`returning_freed_memory` (a local run): in this process (``mallopt``), which
holds the runner's buffers between stages, the mapping threshold is fixed at 128 kB (blocks
above it are mapped, and unmapped when freed) and the heap's top is trimmed above 128 kB;
two arenas are allowed. The worker processes it starts, which run the stages, get (through
the environment) a threshold of 4 MB and a trim of 16 MB: at 128 kB a page's own blocks
(its HTML, its decoded text, the extractor's arrays) were mapped and faulted in afresh for
every page, 700-830 faults and about 3 ms a page of whole curate (docs/curation.md). In
``curate_memory`` the largest worker grew about as much at 4 MB as at 128 kB (+237 against
+182 MB from 20,000 to 100,000 documents, the same night) and the whole run less (2,123
against 2,275 MB); the launcher, which holds one stage's whole input at a time, keeps 128 kB. A
setting the user has put in the environment stays. Afterwards the environment is as it was,
what was freed is trimmed (``malloc_trim``), and this process gets the values glibc's
adaptive defaults settle at (threshold 32 MB, trim 64 MB, arenas by core count), since a
small fixed threshold would make every large array of later work in this process (training,
evaluation) a new mapping.
Elsewhere than glibc nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Iterator

# glibc's mallopt parameters (malloc.h) and the environment variables of the same meaning:
# (parameter, this process's value, the worker processes' value).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": (M_MMAP_THRESHOLD, 128 * 1024, 4 << 20),
    "MALLOC_TRIM_THRESHOLD_": (M_TRIM_THRESHOLD, 128 * 1024, 16 << 20),
    "MALLOC_ARENA_MAX": (M_ARENA_MAX, 2, 2),
}
AFTER = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: 64 << 20, M_ARENA_MAX: 0}  # 0: glibc's own limit


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - present in glibc only
        return libc
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def returning_freed_memory() -> Iterator[bool]:
    """:data:`SETTINGS` here and in the processes started within the block; yields
    ``False`` when this is not glibc (nothing changes then)."""
    libc = _glibc()
    if libc is None:
        yield False
        return
    added = []
    for env, (param, here, workers) in SETTINGS.items():
        if env in os.environ:
            continue  # the user's choice, for this process too (glibc read it at start)
        libc.mallopt(param, here)
        os.environ[env] = str(workers)
        added.append((env, param))
    try:
        yield True
    finally:
        for env, param in added:
            os.environ.pop(env, None)
            libc.mallopt(param, AFTER[param])
        libc.malloc_trim(0)
