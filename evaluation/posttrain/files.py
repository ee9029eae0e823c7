"""Reading the post-training tasks' files: one JSON-lines reader and one error type for all
of them, so a missing or broken file is one line naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from afm.errors import UserError


class PosttrainDataError(UserError):
    """A post-training task's file that is missing or not in its publisher's layout."""


def read_json_lines(path: Path, error: type[PosttrainDataError] = PosttrainDataError) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, one a line (blank lines skipped); ``error`` otherwise."""
    try:
        with path.open(encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError) as exc:
        raise error(f"{path}: not readable as one JSON object per line ({exc})") from None
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise error(f"{path}: line {n} is not a JSON object")
    return rows
