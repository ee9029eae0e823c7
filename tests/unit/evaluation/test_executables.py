"""Compiled programs stored across processes: reused only when nothing that decides them changed."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.evaluation import executables


@partial(jax.jit, static_argnames=("power",))
def _raise(x, *, power: int):
    return x ** power + 1


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(executables, "_store_dir", lambda: tmp_path / "executables")
    monkeypatch.setattr(executables, "_memory", {})
    return tmp_path / "executables"


def _new_process(monkeypatch) -> None:
    """What a new process starts with: nothing compiled in memory."""
    monkeypatch.setattr(executables, "_memory", {})


def test_a_stored_program_is_loaded_by_the_next_process_with_the_same_result(store, monkeypatch) -> None:
    x = jnp.arange(6.0)
    first = executables.call(_raise, {"power": 2}, x, packages=("afm.model",))
    assert len(list(store.glob("*.bin"))) == 1
    _new_process(monkeypatch)
    monkeypatch.setattr(_raise, "lower", None, raising=False)  # loading must not trace or lower
    again = executables.call(_raise, {"power": 2}, x, packages=("afm.model",))
    np.testing.assert_array_equal(np.asarray(first), np.asarray(again))


def test_static_arguments_shapes_and_source_each_key_their_own_program(store, monkeypatch) -> None:
    executables.call(_raise, {"power": 2}, jnp.arange(6.0), packages=("afm.model",))
    executables.call(_raise, {"power": 3}, jnp.arange(6.0), packages=("afm.model",))
    executables.call(_raise, {"power": 2}, jnp.arange(7.0), packages=("afm.model",))
    assert len(list(store.glob("*.bin"))) == 3
    _new_process(monkeypatch)
    monkeypatch.setattr(executables, "source_hash", lambda packages: "edited")  # the model code changed
    out = executables.call(_raise, {"power": 2}, jnp.arange(6.0), packages=("afm.model",))
    assert len(list(store.glob("*.bin"))) == 4 and float(out[2]) == 5.0


def test_an_unreadable_stored_program_is_recompiled_and_replaced(store, monkeypatch, capsys) -> None:
    executables.call(_raise, {"power": 2}, jnp.arange(3.0), packages=("afm.model",))
    (path,) = store.glob("*.bin")
    path.write_bytes(b"truncated")
    _new_process(monkeypatch)
    out = executables.call(_raise, {"power": 2}, jnp.arange(3.0), packages=("afm.model",))
    assert [float(v) for v in out] == [1.0, 2.0, 5.0]
    assert "recompiling" in capsys.readouterr().err and path.read_bytes() != b"truncated"


def test_without_a_compile_cache_programs_stay_in_memory(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(executables, "_store_dir", lambda: None)
    monkeypatch.setattr(executables, "_memory", {})
    out = executables.call(_raise, {"power": 2}, jnp.ones(2), packages=("afm.model",))
    assert [float(v) for v in out] == [2.0, 2.0] and len(executables._memory) == 1
    assert not list(tmp_path.rglob("*.bin"))


def test_the_source_hash_follows_the_code() -> None:
    assert executables.source_hash(("afm.model",)) != executables.source_hash(("afm.evaluation",))
    assert len(executables.source_hash(("afm.model", "afm.evaluation"))) == 64


_PROCESS = """
import sys, jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from afm.evaluation import executables
f = jax.jit(lambda x: -(x ** 3) + jnp.sin(x))
x = jnp.arange(5.0)
print(float((f(x) if sys.argv[2] == "plain" else executables.call(f, {}, x, packages=("afm.model",)))[2]))
"""


def test_a_program_stored_from_a_warm_jax_cache_runs_in_the_next_process(tmp_path) -> None:
    """XLA:CPU executables that JAX's persistent cache loaded serialise without their
    kernels ("Function ... not found" in the next process); the store compiles afresh.
    Three processes: JAX's cache is filled, the program stored, then loaded and run."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    runs = [subprocess.run([sys.executable, "-c", _PROCESS, str(tmp_path), mode], capture_output=True,
                           text=True, timeout=120, env=env) for mode in ("plain", "store", "store")]
    assert [r.returncode for r in runs] == [0, 0, 0], runs[-1].stderr[-500:]
    assert len({r.stdout for r in runs}) == 1
    assert len(list((tmp_path / "executables").glob("*.bin"))) == 1


_IN_ONE_PROCESS = """
import sys
from pathlib import Path
import jax, jax.numpy as jnp
root = Path(sys.argv[1])
jax.config.update("jax_compilation_cache_dir", str(root / "jax"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from afm.evaluation import executables

@jax.jit
def warmup(x):  # something compiled first with JAX's cache on (a model trained, say)
    return jnp.cumsum(x) * 3

@jax.jit
def program(x):  # a fusion with its own kernel (iota, convert, compare)
    return jnp.where(jnp.arange(x.shape[0]) % 3 == 0, x.astype(jnp.float32) * 2, -x) + 1

x = jnp.arange(12, dtype=jnp.int32)
if sys.argv[2] == "plain":  # the program compiled through JAX alone: now in its persistent cache
    print(list(map(float, program.lower(x).compile()(x))))
    sys.exit()
if sys.argv[2] == "store":  # this process compiles first with JAX's cache on: the program comes from it
    warmup(x).block_until_ready()
    program.lower(x).compile()
print(list(map(float, executables.call(program, {}, x, packages=("afm.model",)))))
"""


def test_a_process_that_compiled_with_the_jax_cache_on_stores_runnable_programs(tmp_path) -> None:
    """JAX decides once per process whether it reads its persistent cache, so once anything
    was compiled (a model trained in the same process, as a notebook does) switching the
    cache off for one compile does nothing: the store then wrote a cache-loaded XLA:CPU
    executable, which fails when loaded ("Function iota_convert_fusion not found"). A program
    to be stored is compiled afresh whatever the process compiled before."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    runs = [subprocess.run([sys.executable, "-c", _IN_ONE_PROCESS, str(tmp_path), mode], capture_output=True,
                           text=True, timeout=120, env=env) for mode in ("plain", "store", "load")]
    assert [r.returncode for r in runs] == [0, 0, 0], runs[-1].stderr[-1500:]
    assert len({r.stdout for r in runs}) == 1
