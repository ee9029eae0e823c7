"""Where the project's external evaluation data lives: ``../shared`` beside the checkout.

Developers and CI have it (robots.txt cases, the extraction benchmark, benchmark test
sets); users do not, so every reader of it (benchmarks, the eval suite's default data
directory, tests) asks here and degrades clearly when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def find_shared_dir() -> Path | None:
    """``$AFM_SHARED_DIR``, else ``../shared`` beside the checkout, else ``shared/`` inside
    it; None when none holds an ``eval/`` folder."""
    env = os.environ.get("AFM_SHARED_DIR")
    candidates = [Path(env)] if env else []
    candidates += [CHECKOUT.parent / "shared", CHECKOUT / "shared"]
    for c in candidates:
        if (c / "eval").is_dir():
            return c
    return None
