"""JAX's persistent compilation cache, on by default for every ``afm`` command.

Why: a cold start spends most of its time compiling programs that the previous run
compiled already (the training step, the initialiser, evaluation's scoring and decoding
programs). With the cache a second ``afm train`` / ``eval`` / ``generate`` / ``rl`` /
``bench`` run loads them from disk instead.

Where (first that applies):

1. ``afm --compile-cache DIR`` (or ``off``), or the ``AFM_COMPILE_CACHE`` variable;
2. a cache JAX was told about already (``JAX_COMPILATION_CACHE_DIR``, or
   ``jax_compilation_cache_dir`` set in this process, e.g. by the tests);
3. ``$XDG_CACHE_HOME/afm/jax`` (``~/.cache/afm/jax``).

``off`` (also ``0``, ``false``, ``no``, ``none``) turns the cache off. Programs that
compile in less than ``AFM_COMPILE_CACHE_MIN_SECS`` seconds (default 0.1; set by
``jax_persistent_cache_min_compile_time_secs``) are not written: evaluation's cold start
is many sub-second programs, below JAX's own 1 s default. The directory is created
private to the user: JAX trusts what it loads from the cache (its documentation: a
shared, writable cache lets others run code in your process). Delete it to reclaim space.

The settings go into the environment when JAX is not imported yet (so ``afm --help``
and commands without JAX never import it, and child processes inherit them), and into
``jax.config`` as well when it is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from afm.errors import UserError

ENV = "AFM_COMPILE_CACHE"
MIN_SECS_ENV = "AFM_COMPILE_CACHE_MIN_SECS"
OFF = frozenset({"off", "0", "false", "no", "none"})
DEFAULT_MIN_SECS = 0.1


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/afm/jax``, ``~/.cache/afm/jax`` without it."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afm" / "jax"


def _jax_dir_already_set() -> str | None:
    if "jax" in sys.modules:
        import jax

        if jax.config.jax_compilation_cache_dir:
            return str(jax.config.jax_compilation_cache_dir)
    return os.environ.get("JAX_COMPILATION_CACHE_DIR") or None


def resolve(setting: str | None) -> Path | None:
    """The cache directory for ``setting`` (the flag's value, else ``AFM_COMPILE_CACHE``),
    or None when the cache is off."""
    value = setting if setting is not None else os.environ.get(ENV)
    if value is not None and value.strip().lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    existing = _jax_dir_already_set()
    return Path(existing) if existing else default_dir()


def _min_secs() -> float:
    raw = os.environ.get(MIN_SECS_ENV)
    if raw is None:
        return DEFAULT_MIN_SECS
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{MIN_SECS_ENV} must be a number of seconds, got {raw!r}") from None
    if not value >= 0:
        raise UserError(f"{MIN_SECS_ENV} must be >= 0, got {raw!r}")
    return value


def configure(setting: str | None = None) -> Path | None:
    """Turn the persistent cache on at :func:`resolve`'s directory (or off); returns it.

    A cache JAX was given already (rule 2) is left exactly as it was set up."""
    value = setting if setting is not None else os.environ.get(ENV)
    directory = resolve(setting)
    if not value and directory is not None and str(directory) == _jax_dir_already_set():
        return directory
    min_secs = _min_secs()
    if directory is None:
        settings = {"JAX_ENABLE_COMPILATION_CACHE": "false"}
    else:
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise UserError(f"compile cache: cannot create {directory}: {exc.strerror} "
                            f"(choose another with --compile-cache DIR, or 'off')") from None
        settings = {
            "JAX_ENABLE_COMPILATION_CACHE": "true",
            "JAX_COMPILATION_CACHE_DIR": str(directory),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": repr(min_secs),
        }
    os.environ.update(settings)
    if "jax" in sys.modules:
        _apply_to_jax(directory, min_secs)
    return directory


def _apply_to_jax(directory: Path | None, min_secs: float) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", directory is not None)
    if directory is None:
        return
    if jax.config.jax_compilation_cache_dir != str(directory):
        from jax.experimental.compilation_cache import compilation_cache

        jax.config.update("jax_compilation_cache_dir", str(directory))
        compilation_cache.reset_cache()  # a cache opened on another directory re-opens here
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_secs)
