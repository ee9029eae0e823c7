"""Shared fixtures: the ../shared/eval data (skipped with a message when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from afm.benchutil import find_shared_dir


@pytest.fixture(scope="session")
def shared_eval() -> Path:
    """``../shared/eval`` (real external data); tests needing it skip when it is absent."""
    shared = find_shared_dir()
    if shared is None:
        pytest.skip("../shared/eval is not present (it exists for developers and CI only)")
    return shared / "eval"
