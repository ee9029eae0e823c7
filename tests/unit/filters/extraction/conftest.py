"""Fixtures of the extraction tests."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest


@pytest.fixture
def can_build_c() -> None:
    """Skips unless this machine has the C compiler Python was built with and Python's
    headers: where it has both, the install must have built the optional C extensions
    (``setup.py`` lets a failed build pass silently, so a test says so instead)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) on this machine: the Python/numpy fallbacks run")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        pytest.skip(f"no Python headers ({headers}) on this machine: the Python/numpy fallbacks run")
