"""Compiled programs kept across processes, so a warm start neither traces nor lowers.

JAX's persistent compilation cache (:mod:`afm.app.compile_cache`) saves the XLA compile,
but it is keyed by the lowered program, so every new process still traces the Python
function and lowers it to StableHLO before it can look the program up: about 0.1 s per
program for the tiny model on this 2-core machine, and a cold ``afm eval`` runs 30-40 of
them (one per scoring bucket and batch size, prefill and decode shapes). :func:`call`
keys a jitted function's compiled executable by what decides it — the function, its
static arguments, the shapes, dtypes and shardings of its array arguments, the jax
version, the devices, and a hash of the source of the packages the function's code
lives in and of this module — and keeps it in memory and, beside the compile cache, on disk
(``<cache>/executables``), loading it back with
``jax.experimental.serialize_executable`` in about 0.02 s.

Safety: a stored program is reused only when the source hash matches, so an edited
model is recompiled, never run stale. A program to be stored is compiled afresh, never
taken from JAX's persistent cache: an XLA:CPU executable that cache loaded serialises
without its kernels and fails when loaded ("Function iota_convert_fusion not found"). JAX
decides once per process whether it reads that cache, so turning the flag off for one
compile does nothing after anything else compiled (a model trained in the same process, a
notebook): :func:`_persistent_cache_off` makes JAX decide again around the compile, the
compile asks for a program of its own (:data:`FRESH_COMPILE`, so JAX's in-memory cache cannot
hand back one it loaded earlier), and a compile JAX still reports as a cache hit is kept in
memory, never stored. :data:`COUNTS`
says what happened (compiled, loaded, stored, kept in memory after a cache hit). Files are written private to the user into the
cache directory JAX already trusts (loading deserialises, as JAX's own cache does);
anything unreadable is recompiled and overwritten. With the compile cache off,
executables are kept in memory only.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pickle
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

_memory: dict[Any, Any] = {}
_source_hashes: dict[tuple[str, ...], str] = {}
COUNTS: dict[str, int] = {"compiled": 0, "loaded": 0, "stored": 0, "cache_hit_not_stored": 0}
_cache_hits = [0]  # JAX's persistent-cache hits seen in this process (a monitoring listener)
# A compiler option that changes nothing in the program (it only concerns dumps, which are
# off) but is part of the key of JAX's in-memory cache of compiled programs: without it,
# a program this process already compiled (or loaded from JAX's persistent cache) would be
# handed back as it is, and a loaded one is what must never be stored.
FRESH_COMPILE = {"xla_dump_hlo_as_text": False}
_listening = [False]


def _count_cache_hits(event: str, **_: Any) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _cache_hits[0] += 1


def source_hash(packages: Sequence[str]) -> str:
    """sha256 of every ``.py`` file (path and bytes) under the given packages' folders."""
    key = tuple(packages)
    if key not in _source_hashes:
        digest = hashlib.sha256()
        for name in key:
            for folder in importlib.util.find_spec(name).submodule_search_locations or ():
                for path in sorted(Path(folder).rglob("*.py")):
                    digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
        _source_hashes[key] = digest.hexdigest()
    return _source_hashes[key]


def _leaf_signature(leaf: Any) -> tuple:
    import jax

    sharding = getattr(leaf, "sharding", None)
    devices = () if sharding is None else tuple(d.id for d in sharding._device_assignment)
    return (str(jax.typeof(leaf)), repr(sharding), devices)


def _environment() -> tuple:
    import jax
    import jaxlib

    devices = jax.devices()
    return (jax.__version__, jaxlib.__version__, jax.default_backend(), devices[0].client.platform_version,
            tuple((d.id, d.device_kind) for d in devices), os.environ.get("XLA_FLAGS", ""),
            bool(jax.config.jax_enable_x64), str(jax.config.jax_default_matmul_precision))


def _execution_devices(compiled: Any) -> list[int]:
    """The ids of the devices a compiled program runs on, in its order (a program is
    loaded back onto exactly these: by default JAX would assume every device)."""
    import jax

    sharding = jax.tree_util.tree_leaves(compiled.input_shardings)[0]
    order = getattr(sharding, "_device_assignment", None) or sorted(sharding.device_set, key=lambda d: d.id)
    return [d.id for d in order]


def _store_dir() -> Path | None:
    import jax

    if not jax.config.jax_enable_compilation_cache or not jax.config.jax_compilation_cache_dir:
        return None
    return Path(jax.config.jax_compilation_cache_dir) / "executables"


def call(fn: Callable[..., Any], static: dict[str, Any], *args: Any, packages: Sequence[str]) -> Any:
    """``fn(*args, **static)`` for a ``jax.jit`` function whose ``static`` arguments are
    keyword arguments it was told are static, through a compiled executable kept in
    memory and on disk (see the module docstring). ``packages`` are the packages whose
    code the traced function runs (its source hash is part of the key)."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    # Called for every batch and decode chunk: the in-memory key is hashable objects
    # (0.15 ms for the 100m model's 140 leaves); the printable key for the disk only on a miss.
    key = (fn, tuple(sorted(static.items())), tree,
           tuple((getattr(x, "aval", None) or jax.typeof(x), getattr(x, "sharding", None)) for x in leaves))
    compiled = _memory.get(key)
    if compiled is None:
        compiled = _load_or_compile(fn, static, args, (key[1], tree, tuple(map(_leaf_signature, leaves))), packages)
        _memory[key] = compiled
    return compiled(*args)


@contextlib.contextmanager
def _persistent_cache_off() -> Iterator[None]:
    """JAX's persistent cache off for what runs inside, whatever the process compiled
    before. ``is_cache_used`` is decided once per process and memoised, so the flag alone
    changes nothing once a program was compiled; ``reset_cache`` (public in
    ``jax.experimental.compilation_cache``) makes JAX decide again: off inside, and on
    again, as configured, for the next compile after."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    enabled = jax.config.jax_enable_compilation_cache
    compilation_cache.reset_cache()
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", enabled)
        compilation_cache.reset_cache()


def _compile_fresh(fn: Any, static: dict[str, Any], args: tuple) -> tuple[Any, bool]:
    """The program compiled with JAX's persistent cache off (see the module docstring), and
    whether JAX nevertheless reported a cache hit (then it must not be stored)."""
    import jax

    if not _listening[0]:
        jax.monitoring.register_event_listener(_count_cache_hits)
        _listening[0] = True
    hits = _cache_hits[0]
    with _persistent_cache_off():
        compiled = fn.lower(*args, **static).compile(compiler_options=FRESH_COMPILE)
    COUNTS["compiled"] += 1
    return compiled, _cache_hits[0] != hits


def _load_or_compile(fn: Any, static: dict[str, Any], args: tuple, signature: tuple,
                     packages: Sequence[str]) -> Any:
    """``signature``: (static items, argument tree, printable leaf signatures)."""
    import jax
    from jax.experimental.serialize_executable import deserialize_and_load, serialize

    folder = _store_dir()
    if folder is None:
        return fn.lower(*args, **static).compile()
    name = getattr(fn, "__wrapped__", fn)
    text = repr((name.__module__, name.__qualname__, signature[0], str(signature[1]), signature[2],
                 _environment(), source_hash(packages), hashlib.sha256(Path(__file__).read_bytes()).hexdigest()))
    path = folder / (hashlib.sha256(text.encode()).hexdigest() + ".bin")
    if path.is_file():
        try:
            payload, in_tree, out_tree, device_ids = pickle.loads(path.read_bytes())
            by_id = {d.id: d for d in jax.devices()}
            loaded = deserialize_and_load(payload, in_tree, out_tree,
                                          execution_devices=[by_id[i] for i in device_ids])
            COUNTS["loaded"] += 1
            return loaded
        except Exception as exc:  # a file from an interrupted write or another jaxlib: recompile
            print(f"afm: recompiling {name.__qualname__}: stored program unreadable ({exc})", file=sys.stderr)
    compiled, from_cache = _compile_fresh(fn, static, args)
    if from_cache:  # loaded by JAX's cache after all: runs here, but would not in the next process
        COUNTS["cache_hit_not_stored"] += 1
        return compiled
    try:
        blob = pickle.dumps((*serialize(compiled), _execution_devices(compiled)))
    except Exception:  # a backend that cannot serialise: memory only
        return compiled
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, path)
    COUNTS["stored"] += 1
    return compiled
