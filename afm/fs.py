"""The one filesystem layer: every reader and writer of the project, local or remote.

Local paths (and ``file://`` URLs) go straight to ``os``. Every other URL (``gs://``,
``s3://``, ``hdfs://``, ...) is remote and goes through one backend, chosen once per
process by what the host has installed:

* Apache Beam's ``FileSystems`` where Beam is installed (curation hosts and their
  workers: the pipeline options' credentials and filesystem settings apply);
* ``etils.epath`` otherwise (training hosts: it comes with Orbax, which takes its paths).

So a training host reads token shards from GCS without Beam, and a Beam worker opens the
same URLs as the launcher. Orbax wants ``epath`` paths: :func:`as_path` gives them.
Parquet bytes are read through :func:`open_input` (pyarrow's own GCS/S3 clients with
ranged reads, so a row group costs one request, not a download).

Directories on object stores are prefixes: :func:`list_files` lists every object under
one, :func:`rename` of a directory renames every object below it.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from collections.abc import Iterable
from typing import Any, BinaryIO

LOCAL_SCHEME = "file://"


def is_remote(path: str | os.PathLike[str]) -> bool:
    """True for URLs (``scheme://...``) other than ``file://``."""
    text = str(path)
    return "://" in text and not text.startswith(LOCAL_SCHEME)


def local(path: str | os.PathLike[str]) -> str:
    """A local path without its ``file://`` scheme (other paths unchanged)."""
    text = os.fspath(path)
    return text[len(LOCAL_SCHEME):] if text.startswith(LOCAL_SCHEME) else text


def has_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def join(base: str | os.PathLike[str], *parts: str) -> str:
    """Path join that needs no filesystem plugin (a dry run can name gs:// paths on a
    machine without Beam's GCP extra)."""
    base = str(base)
    if is_remote(base):
        return "/".join([base.rstrip("/"), *[p.strip("/") for p in parts]])
    return os.path.join(local(base), *parts)


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] if is_remote(path) else os.path.basename(local(path))


def dirname(path: str) -> str:
    if is_remote(path):
        return path.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(local(path)))


# -- the remote backend ------------------------------------------------------------------------


class _BeamBackend:
    """Remote files through ``apache_beam.io.filesystems.FileSystems``."""

    def __init__(self) -> None:
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems

        self.fs, self.raw = FileSystems, CompressionTypes.UNCOMPRESSED

    def open_read(self, path: str) -> BinaryIO:
        return self.fs.open(path, compression_type=self.raw)

    def open_write(self, path: str) -> BinaryIO:
        return self.fs.create(path, mime_type="application/octet-stream", compression_type=self.raw)

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def supports(self, path: str) -> bool:
        try:
            self.fs.get_filesystem(path)  # Beam's registry of plugins (gs:// needs its GCP extra)
        except ValueError:
            return False
        return True

    def match(self, pattern: str) -> list[str]:
        try:
            return [m.path for m in self.fs.match([pattern])[0].metadata_list]
        except Exception:  # noqa: BLE001 - an empty or absent prefix matches nothing
            return []

    def size(self, path: str) -> int:
        return int(self.fs.match([path])[0].metadata_list[0].size_in_bytes)

    def rename(self, sources: list[str], targets: list[str]) -> None:
        self.fs.rename(sources, targets)

    def delete(self, paths: list[str]) -> None:
        self.fs.delete(paths)


class _EpathBackend:
    """Remote files through ``etils.epath`` (hosts without Beam)."""

    def __init__(self) -> None:
        from etils import epath

        self.Path = epath.Path

    def open_read(self, path: str) -> BinaryIO:
        return self.Path(path).open("rb")

    def open_write(self, path: str) -> BinaryIO:
        return self.Path(path).open("wb")

    def exists(self, path: str) -> bool:
        return self.Path(path).exists()

    def supports(self, path: str) -> bool:
        try:  # epath opens object stores through fsspec (gcsfs, s3fs, ...)
            import fsspec

            fsspec.get_filesystem_class(path.split("://", 1)[0])
        except (ImportError, ValueError):
            return False
        return True

    def match(self, pattern: str) -> list[str]:
        root, rest = _split_glob(pattern)
        if rest in ("**", ""):
            base = self.Path(root)
            return [str(p) for p in base.rglob("*") if not p.is_dir()] if base.is_dir() else []
        return [str(p) for p in self.Path(root).glob(rest)]

    def size(self, path: str) -> int:
        return int(self.Path(path).stat().length)

    def rename(self, sources: list[str], targets: list[str]) -> None:
        for src, dst in zip(sources, targets, strict=True):
            self.Path(src).rename(dst)

    def delete(self, paths: list[str]) -> None:
        for p in paths:
            self.Path(p).unlink(missing_ok=True)


_BACKEND: Any = None


def _remote() -> Any:
    """The process's remote backend (see the module docstring)."""
    global _BACKEND
    if _BACKEND is None:
        for backend in (_BeamBackend, _EpathBackend):
            try:
                _BACKEND = backend()
                break
            except ImportError:
                continue
        else:
            raise RuntimeError("reading or writing URLs (gs://, s3://, ...) needs Apache Beam "
                               "(pip install 'afm[curate]') or etils (pip install 'afm[train]')")
    return _BACKEND


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


# -- files -----------------------------------------------------------------------------------


def open_read(path: str) -> BinaryIO:
    """The file's raw bytes (never decompressed: readers decide what a suffix means)."""
    if is_remote(path):
        return _remote().open_read(path)
    return open(local(path), "rb")  # noqa: SIM115 - the caller closes it


def open_write(path: str) -> BinaryIO:
    """A new file for writing raw bytes (parent directories created)."""
    if is_remote(path):
        return _remote().open_write(path)
    path = local(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "wb")  # noqa: SIM115 - the caller closes it


def open_input(path: str) -> Any:
    """A seekable binary source for pyarrow: the path itself when local, pyarrow's own
    filesystem (GCS/S3/HDFS, ranged reads) when remote."""
    if not is_remote(path):
        return local(path)
    import pyarrow.fs as pafs

    filesystem, inner = pafs.FileSystem.from_uri(path)
    return filesystem.open_input_file(inner)


def reachable(path: str) -> bool:
    """Whether this machine has a filesystem for ``path``'s scheme, without a request:
    always for a local path; for a URL, whether the remote backend has a plugin for it
    (Beam without its GCP extra has none for ``gs://``, yet a dry run may name such paths)."""
    if not is_remote(path):
        return True
    try:
        return bool(_remote().supports(path))
    except RuntimeError:  # neither Beam nor etils here
        return False


def exists(path: str) -> bool:
    if is_remote(path):
        return _remote().exists(path) or bool(list_files(path))
    return os.path.exists(local(path))


def isdir(path: str) -> bool:
    """A local directory, or a remote prefix that holds objects."""
    if is_remote(path):
        return bool(list_files(path))
    return os.path.isdir(local(path))


def isfile(path: str) -> bool:
    if is_remote(path):
        return _remote().exists(path) and not path.endswith("/")
    return os.path.isfile(local(path))


def size(path: str) -> int:
    """File size in bytes (one metadata request for a remote object)."""
    if is_remote(path):
        return _remote().size(path)
    return os.path.getsize(local(path))


def list_files(directory: str, recursive: bool = True) -> list[str]:
    """Every file below ``directory`` (sorted; hidden names included: callers filter)."""
    if is_remote(directory):
        prefix = directory.rstrip("/") + "/"
        found = _remote().match(prefix + "**")
        if not recursive:
            found = [p for p in found if "/" not in p[len(prefix):]]
        return sorted(found)
    directory = local(directory)
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
    directory = local(directory)
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def glob(pattern: str) -> list[str]:
    """Files matching a glob (``**`` recursive locally), sorted."""
    if is_remote(pattern):
        return sorted(_remote().match(pattern))
    return sorted(p for p in _glob.glob(local(pattern), recursive=True) if os.path.isfile(p))


def expand(patterns: Iterable[str], suffix: str) -> tuple[list[str], list[str]]:
    """Files ending in ``suffix`` named by paths, directories (recursive) or globs, sorted
    and unique (local ones absolute), and the patterns that named nothing that exists."""
    files: list[str] = []
    missing: list[str] = []
    for pattern in patterns:
        pattern = str(pattern)
        if has_glob(pattern):
            found = [f for f in glob(pattern) if f.endswith(suffix)]
        elif isdir(pattern):
            found = [f for f in list_files(pattern) if f.endswith(suffix)]
        elif isfile(pattern):
            found = [pattern]
        else:
            missing.append(pattern)
            continue
        files += [f if is_remote(f) else os.path.abspath(local(f)) for f in found]
    return sorted(set(files)), missing


def mkdirs(path: str) -> None:
    if not is_remote(path):  # object stores have no directories
        os.makedirs(local(path), exist_ok=True)


def rename(src: str, dst: str) -> None:
    """Move a file or a directory (on object stores: every object below the prefix)."""
    if is_remote(src):
        if isfile(src):
            _remote().rename([src], [dst])
            return
        srcs = list_files(src)
        prefix = src.rstrip("/") + "/"
        _remote().rename(srcs, [join(dst, s[len(prefix):]) for s in srcs])
        return
    src, dst = local(src), local(dst)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    os.replace(src, dst)


def delete(paths: Iterable[str]) -> None:
    """Delete files and directories (recursively); missing paths are ignored."""
    for path in paths:
        if is_remote(path):
            targets = [path] if isfile(path) else list_files(path)
            if targets:
                _remote().delete(targets)
            continue
        path = local(path)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)


def temp_sibling(path: str | os.PathLike[str]) -> str:
    """The hidden temporary name a writer uses beside ``path`` before renaming into it."""
    path = str(path)
    return join(dirname(path), f".{basename(path)}.tmp-{os.getpid()}")


def write_bytes(path: str, payload: bytes) -> None:
    """Write a whole file atomically on local disks (temp name + rename); on object
    stores an upload is atomic already."""
    if is_remote(path):
        with open_write(path) as fh:
            fh.write(payload)
        return
    path = local(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = temp_sibling(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:  # a directory in the way, a full disk: leave no temporary behind
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


def write_text_atomic(path: str, text: str) -> None:
    """Write text under a temporary name, then rename: readers never see half a file."""
    write_bytes(str(path), text.encode("utf-8"))


def read_bytes(path: str) -> bytes:
    with open_read(path) as fh:
        return fh.read()


def as_path(path: str | os.PathLike[str]) -> Any:
    """An ``etils.epath.Path`` (what Orbax takes); local paths made absolute, so Orbax and
    every host agree on them."""
    from etils import epath

    text = os.fspath(path)
    return epath.Path(text if is_remote(text) else os.path.abspath(local(text)))


BUILTIN = "builtin"  # a model setting naming the file shipped inside the package


def shipped_or(path: str, shipped: str | os.PathLike[str]) -> str:
    """Where a worker finds a model setting: ``builtin`` is the ``shipped`` file inside this
    process's installation of afm (never the launcher's checkout, which a cluster worker
    does not have); local paths and URLs are taken as they are."""
    return os.fspath(shipped) if path == BUILTIN else path


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
        return local(path)
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
