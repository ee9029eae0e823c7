"""Paths for local disks and object stores (``gs://``, ``s3://``) through one library.

Run directories, checkpoints and token shards may live on GCS. ``etils.epath`` (already
installed with Orbax, which takes its paths too) lists and globs them; Parquet bytes are
read with pyarrow's own filesystem layer, which has a native GCS/S3 client and reads
row groups with ranged requests instead of downloading whole files. Local paths go
straight to the OS. Remote paths need credentials on the host (and ``gcsfs`` for
``epath`` listings on GCS: ``pip install gcsfs``).
"""

from __future__ import annotations

import glob
import os
from typing import Any

from etils import epath

REMOTE_SCHEMES = ("gs://", "s3://", "az://", "hf://")


def is_remote(path: str | os.PathLike[str]) -> bool:
    return str(path).startswith(REMOTE_SCHEMES)


def as_path(path: str | os.PathLike[str]) -> epath.Path:
    """An ``epath.Path`` (local paths made absolute, so Orbax and workers agree)."""
    text = os.fspath(path)
    return epath.Path(text if is_remote(text) else os.path.abspath(text))


def has_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def expand(patterns: list[str], suffix: str) -> tuple[list[str], list[str]]:
    """Files ending in ``suffix`` named by paths, directories (recursive) or globs, sorted
    and unique, and the patterns that named nothing that exists.

    Local globs may use ``**``; remote ones may not (``epath`` refuses recursive globs on
    object stores: every level would be a listing request)."""
    files: list[str] = []
    missing: list[str] = []
    for pattern in patterns:
        if not is_remote(pattern):
            files += _expand_local(pattern, suffix, missing)
        elif has_glob(pattern):
            root, rest = _split_glob(pattern)
            files += [str(p) for p in epath.Path(root).glob(rest) if str(p).endswith(suffix)]
        else:
            path = epath.Path(pattern)
            if path.is_dir():
                files += [str(p) for p in path.rglob(f"*{suffix}")]
            elif path.exists():
                files.append(str(path))
            else:
                missing.append(pattern)
    return sorted(set(files)), missing


def _expand_local(pattern: str, suffix: str, missing: list[str]) -> list[str]:
    if has_glob(pattern):
        return [os.path.abspath(f) for f in glob.glob(pattern, recursive=True) if f.endswith(suffix)]
    if os.path.isdir(pattern):
        return [
            os.path.abspath(os.path.join(root, n))
            for root, _dirs, names in os.walk(pattern) for n in names if n.endswith(suffix)
        ]
    if os.path.isfile(pattern):
        return [os.path.abspath(pattern)]
    missing.append(pattern)
    return []


def _split_glob(pattern: str) -> tuple[str, str]:
    """``gs://b/sub/*.parquet`` -> (``gs://b/sub``, ``*.parquet``): the longest prefix
    without wildcards is the directory to glob from."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if has_glob(part):
            if i <= 2:
                raise ValueError(f"glob needs a bucket before the wildcard: {pattern}")
            return "/".join(parts[:i]), "/".join(parts[i:])
    return pattern, ""


def size(path: str) -> int:
    """File size in bytes (one metadata request for a remote object)."""
    return os.path.getsize(path) if not is_remote(path) else int(epath.Path(path).stat().length)


def write_text_atomic(path: str, text: str) -> None:
    """Write under a temporary name, then rename: readers never see half a file."""
    target = as_path(path)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    tmp.write_text(text)
    tmp.replace(target)  # overwrites (rename refuses to)


def open_input(path: str) -> Any:
    """A seekable binary file for pyarrow: the OS for local paths, pyarrow's filesystem
    (GCS/S3, ranged reads) for remote ones."""
    if not is_remote(path):
        return path
    import pyarrow.fs as pafs

    fs, inner = pafs.FileSystem.from_uri(path)
    return fs.open_input_file(inner)
