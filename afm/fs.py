"""One path abstraction for every reader and writer of the data path.

Local paths go through ``os`` (no Beam needed, so a training host can read documents);
URLs (``gs://``, ``s3://``, ``hdfs://``...) go through Apache Beam's ``FileSystems``,
imported only when such a path is met. Every reader and writer calls these functions
instead of ``open``/``os`` directly, so moving the whole data path onto Beam's
filesystems (or any other store) is a change to this module alone.

Directories on object stores are prefixes: :func:`list_files` lists every object under
one, :func:`rename` of a directory renames every object below it.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from collections.abc import Iterable
from typing import Any, BinaryIO


def is_remote(path: str | os.PathLike[str]) -> bool:
    """True for URLs (``scheme://...``) that need a Beam filesystem."""
    return "://" in str(path)


def join(base: str | os.PathLike[str], *parts: str) -> str:
    """Path join that needs no filesystem plugin (a dry run can name gs:// paths on a
    machine without Beam's GCP extra)."""
    base = str(base)
    if is_remote(base):
        return "/".join([base.rstrip("/"), *[p.strip("/") for p in parts]])
    return os.path.join(base, *parts)


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] if is_remote(path) else os.path.basename(path)


def dirname(path: str) -> str:
    if is_remote(path):
        return path.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(path))


def _beam() -> Any:
    try:
        from apache_beam.io.filesystems import FileSystems
    except ImportError as exc:  # pragma: no cover - only without the curate extra
        raise RuntimeError("reading or writing URLs (gs://, s3://, ...) needs Apache Beam: "
                           "pip install 'afm[curate]'") from exc
    return FileSystems


def open_read(path: str) -> BinaryIO:
    """The file's raw bytes (never decompressed: readers decide what a suffix means)."""
    if is_remote(path):
        from apache_beam.io.filesystem import CompressionTypes

        return _beam().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def open_write(path: str) -> BinaryIO:
    """A new file for writing raw bytes (parent directories created)."""
    if is_remote(path):
        from apache_beam.io.filesystem import CompressionTypes

        return _beam().create(path, mime_type="application/octet-stream",
                              compression_type=CompressionTypes.UNCOMPRESSED)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "wb")  # noqa: SIM115 - the caller closes it


def exists(path: str) -> bool:
    if is_remote(path):
        return bool(_beam().exists(path)) or bool(list_files(path))
    return os.path.exists(path)


def isdir(path: str) -> bool:
    """A local directory, or a remote prefix that holds objects."""
    if is_remote(path):
        return bool(list_files(path))
    return os.path.isdir(path)


def isfile(path: str) -> bool:
    if is_remote(path):
        return bool(_beam().exists(path)) and not path.endswith("/")
    return os.path.isfile(path)


def size(path: str) -> int:
    if is_remote(path):
        return int(_beam().match([path])[0].metadata_list[0].size_in_bytes)
    return os.path.getsize(path)


def list_files(directory: str, recursive: bool = True) -> list[str]:
    """Every file below ``directory`` (sorted; hidden names included: callers filter)."""
    if is_remote(directory):
        prefix = directory.rstrip("/") + "/"
        try:
            found = [m.path for m in _beam().match([prefix + "**"])[0].metadata_list]
        except Exception:  # noqa: BLE001 - an empty or absent prefix matches nothing
            return []
        if not recursive:
            found = [p for p in found if "/" not in p[len(prefix):]]
        return sorted(found)
    if not os.path.isdir(directory):
        return []
    if not recursive:
        return sorted(os.path.join(directory, f) for f in os.listdir(directory)
                      if os.path.isfile(os.path.join(directory, f)))
    out = []
    for root, _dirs, files in os.walk(directory):
        out.extend(os.path.join(root, f) for f in files)
    return sorted(out)


def list_dir(directory: str) -> list[str]:
    """The names directly inside ``directory`` (files and sub-directories), sorted."""
    if is_remote(directory):
        prefix = directory.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/", 1)[0] for p in list_files(directory)})
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def glob(pattern: str) -> list[str]:
    """Files matching a glob (``**`` recursive), sorted."""
    if is_remote(pattern):
        try:
            return sorted(m.path for m in _beam().match([pattern])[0].metadata_list)
        except Exception:  # noqa: BLE001 - nothing matched
            return []
    return sorted(p for p in _glob.glob(pattern, recursive=True) if os.path.isfile(p))


def mkdirs(path: str) -> None:
    if not is_remote(path):  # object stores have no directories
        os.makedirs(path, exist_ok=True)


def rename(src: str, dst: str) -> None:
    """Move a file or a directory (on object stores: every object below the prefix)."""
    if is_remote(src):
        fs = _beam()
        if isfile(src):
            fs.rename([src], [dst])
            return
        srcs = list_files(src)
        prefix = src.rstrip("/") + "/"
        fs.rename(srcs, [join(dst, s[len(prefix):]) for s in srcs])
        return
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    os.replace(src, dst)


def delete(paths: Iterable[str]) -> None:
    """Delete files and directories (recursively); missing paths are ignored."""
    for path in paths:
        if is_remote(path):
            targets = [path] if isfile(path) else list_files(path)
            if targets:
                _beam().delete(targets)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)


def write_bytes(path: str, payload: bytes) -> None:
    """Write a whole file atomically on local disks (temp name + rename); on object
    stores an upload is atomic already."""
    if is_remote(path):
        with open_write(path) as fh:
            fh.write(payload)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = temp_sibling(path)
    with open(tmp, "wb") as fh:
        fh.write(payload)
    os.replace(tmp, path)


def read_bytes(path: str) -> bytes:
    with open_read(path) as fh:
        return fh.read()


def temp_sibling(path: str | os.PathLike[str]) -> str:
    """The hidden temporary name a writer uses beside ``path`` before renaming into it."""
    path = str(path)
    return join(dirname(path), f".{basename(path)}.tmp-{os.getpid()}")


def localize(path: str, cache_dir: str | None = None, companions: tuple[str, ...] = ()) -> str:
    """A path on this machine's disk for ``path``, for libraries that need one (memory
    maps, fastText). A local path is returned as it is; a URL (a file, or a directory
    prefix) is copied once into ``cache_dir`` (default: ``afm-cache`` in this machine's
    temporary directory, i.e. the worker's own) under a name derived from the URL and
    the sizes of its files, so a changed object is fetched again and concurrent workers
    on one machine share one copy (built beside, then renamed into place).
    ``companions``: suffixes of sibling files that travel with a file when they exist
    (a model's ``.json`` metadata)."""
    import hashlib
    import tempfile
    import uuid

    if not is_remote(path):
        return path
    is_directory = not isfile(path)
    sources = list_files(path) if is_directory else [path]
    extras = [] if is_directory else [path + c for c in companions if isfile(path + c)]
    if not sources:
        raise FileNotFoundError(f"{path}: not found")
    key = hashlib.sha1(path.encode("utf-8"))
    for src in sources + extras:
        key.update(f"\0{src}\0{size(src)}".encode())
    root = cache_dir or os.path.join(tempfile.gettempdir(), "afm-cache")
    final = os.path.join(root, key.hexdigest()[:16], basename(path.rstrip("/")) or "data")
    if os.path.exists(final):
        return final
    tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
    prefix = path.rstrip("/") + "/"
    for src in sources:
        dest = os.path.join(tmp, src[len(prefix):]) if is_directory else tmp
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open_read(src) as fh, open(dest, "wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
    for src in extras:  # beside the final name, before it appears
        with open_read(src) as fh, open(final + src[len(path):], "wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
    try:
        os.rename(tmp, final)
    except OSError:  # another worker on this machine finished first: use its copy
        delete([tmp])
    return final
