"""Where the persistent compilation cache goes, and how it is turned off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from afm.app.compile_cache import configure, default_dir, resolve
from afm.errors import UserError


@pytest.fixture
def env(monkeypatch, tmp_path):
    """``configure`` writes JAX's variables into ``os.environ`` itself: the whole environment
    is restored afterwards, so nothing leaks into later tests."""
    saved = dict(os.environ)
    for name in ("AFM_COMPILE_CACHE", "AFM_COMPILE_CACHE_MIN_SECS", "JAX_COMPILATION_CACHE_DIR",
                 "JAX_ENABLE_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr("afm.app.compile_cache._jax_dir_already_set",
                        lambda: os.environ.get("JAX_COMPILATION_CACHE_DIR"))
    monkeypatch.setattr("afm.app.compile_cache._apply_to_jax", lambda *a: None)  # leave the tests' cache
    yield monkeypatch
    os.environ.clear()
    os.environ.update(saved)


def test_default_is_the_user_cache_dir(env, tmp_path: Path) -> None:
    assert default_dir() == tmp_path / "xdg" / "afm" / "jax"
    assert resolve(None) == default_dir()
    assert configure(None) == default_dir() and default_dir().is_dir()
    assert oct(default_dir().stat().st_mode & 0o777) == oct(0o700)  # JAX trusts what it loads

    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(default_dir())
    assert os.environ["JAX_ENABLE_COMPILATION_CACHE"] == "true"
    assert float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) == 0.1


def test_flag_beats_env_beats_jax_setting(env, tmp_path: Path) -> None:
    env.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert resolve(None) == tmp_path / "jax"
    env.setenv("AFM_COMPILE_CACHE", str(tmp_path / "env"))
    assert resolve(None) == tmp_path / "env"
    assert resolve(str(tmp_path / "flag")) == tmp_path / "flag"


@pytest.mark.parametrize("off", ["off", "OFF", "0", "false", "none"])
def test_off(env, off: str) -> None:
    assert configure(off) is None
    assert os.environ["JAX_ENABLE_COMPILATION_CACHE"] == "false"
    env.setenv("AFM_COMPILE_CACHE", off)
    assert resolve(None) is None


@pytest.mark.parametrize("bad", ["soon", "-1", "nan"])
def test_min_secs_is_checked(env, bad: str) -> None:
    env.setenv("AFM_COMPILE_CACHE_MIN_SECS", bad)
    with pytest.raises(UserError, match="AFM_COMPILE_CACHE_MIN_SECS"):
        configure(None)
