"""Inputs checked before a data command starts its pipeline: one line, in seconds.

A pipeline reads its inputs long after it started (Beam's import, planning, workers):
an empty, binary or misnamed file used to fail only after the whole run (94-98 s), and a
typo after 13-23 s. :func:`check_inputs` is run by ``afm curate``, ``afm dedup``,
``afm tokenize``, ``afm decontam run``, ``afm quality filter`` and ``afm tokenizer train``
before anything heavy is imported, with the core libraries alone (the readers of
:mod:`afm.readers`), and raises :class:`InputProblem` (one ``Error:`` line naming the file
and what would be right) when:

* a path matches nothing (with the names in its folder that look like it: a typo);
* a file cannot be opened, or every input is empty (0 bytes, or a Parquet file of no rows);
* a finished afm dataset holds no document (the run that wrote it kept none: its
  manifest says so, with ``--allow-empty``);
* the first records of a file do not decode: not JSON lines, not Parquet, not WARC
  (binary data named ``.jsonl`` is said to be binary).

:func:`check_data_paths` does the same for the training commands' ``--data`` and
``--heldout`` before JAX is imported, and :func:`check_file` for one file read whole (each
benchmark copy of ``afm decontam build-index``).

A few bad records among good ones are not refused here: the readers record them as
``read`` rejects during the run, as always. Only the first ``SAMPLE_FILES`` files are
opened (their heads only), so a run over thousands of remote shards is not delayed.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable

from afm import fs
from afm.config import parse_overrides, read_yaml
from afm.errors import UserError
from afm.io import resolve_inputs
from afm.outputs import MANIFEST, is_dataset_dir
from afm.readers import SUPPORTED_SUFFIXES, Failure, Record, Skipped, file_format, read_file

SAMPLE_FILES = 16  # files whose first records are decoded
SAMPLE_RECORDS = 8  # records (or failures) read from the head of each
BINARY_PROBE = 4096  # bytes looked at to tell binary data from text
SHAPES = {
    "jsonl": 'one JSON object per line, e.g. {"id": "d1", "text": "..."}',
    "parquet": "a Parquet file (columns id, text)",
    "warc": "a WARC file (afm crawl's warc/*.warc.gz, Common Crawl's)",
}


class InputProblem(UserError, FileNotFoundError):
    """An input that cannot be read as documents, said in one line. A FileNotFoundError
    too, so every data command's error handling reports it as it reports a missing file."""


def check_inputs(patterns: Iterable[str], *, allow_rejects: bool = False,
                 directories_as_inputs: bool = False, shapes: dict[str, str] | None = None) -> list[str]:
    """The files ``patterns`` name, checked (see the module docstring); raises
    :class:`InputProblem`. ``shapes``: what a file of each format should hold, for the
    message (default: documents, :data:`SHAPES`)."""
    shapes = {**SHAPES, **(shapes or {})}
    patterns = [str(p) for p in patterns]
    for pattern in patterns:
        _exists(pattern)
    try:
        resolved = resolve_inputs(patterns, allow_rejects=allow_rejects,
                                  directories_as_inputs=directories_as_inputs)
    except InputProblem:
        raise
    except (FileNotFoundError, ValueError) as exc:
        raise InputProblem(str(exc)) from None
    for pattern in patterns:
        _dataset_kept_something(pattern)
    files = resolved.files
    if directories_as_inputs:
        return files
    sizes = {f: _size(f) for f in files if not fs.is_remote(f)}
    if files and sizes and len(sizes) == len(files) and not any(sizes.values()):
        first = files[0]
        raise InputProblem(f"{first}: empty (0 bytes)" + (f", and so are the other {len(files) - 1}"
                                                           if len(files) > 1 else "")
                           + f"; expected {shapes.get(file_format(first) or 'jsonl')}")
    readable = 0
    checked = 0
    problems: list[str] = []
    for path in files:
        if checked >= SAMPLE_FILES:
            break
        if sizes.get(path) == 0:
            continue
        checked += 1
        problem = _head_problem(path, shapes)
        if problem:
            problems.append(problem)
        else:
            readable += 1
    if problems and not readable:
        raise InputProblem(problems[0] + (f" (and {len(problems) - 1} more file(s) like it)"
                                          if len(problems) > 1 else ""))
    return files


def check_data_paths(patterns: Iterable[str], what: str = "training data", *, config: str | None = None,
                     overrides: Iterable[str] = (), key: str = "data.paths") -> None:
    """The training commands' ``--data`` / ``--heldout`` (token shards, prepared SFT sets,
    preference files), checked with the core libraries alone before JAX is imported (5-6 s
    on a busy box, and the run's config printed before the loader met the bad file): a path
    that is not there (with its look-alikes), an empty file, a ``.parquet`` file that is not
    Parquet, a JSON-lines file whose head is binary or does not decode. Directories and
    globs are left to the loader (it knows which files of a dataset it reads). With no
    paths given, those the run will read instead are checked: ``key`` of the overrides, else
    of ``config`` when it is a YAML file (a named stage's own paths are the loader's)."""
    patterns = list(map(str, patterns)) or _configured_paths(config, overrides, key)
    for pattern in patterns:
        try:
            _exists(pattern)
        except InputProblem as exc:
            raise InputProblem(f"{what}: {exc}") from None
        if fs.is_remote(pattern) or fs.has_glob(pattern) or not os.path.isfile(pattern):
            continue
        fmt = file_format(pattern)
        if _size(pattern) == 0:
            raise InputProblem(f"{what}: {pattern}: empty (0 bytes)")
        if fmt == "parquet" and not _parquet_magic(pattern):
            kind = "binary data" if _looks_binary(pattern) else "no Parquet magic bytes"
            raise InputProblem(f"{what}: {pattern}: not a Parquet file ({kind})")
        if fmt == "jsonl":
            problem = _head_problem(pattern)
            if problem:
                raise InputProblem(f"{what}: {problem}")


def _configured_paths(config: str | None, overrides: Iterable[str], key: str) -> list[str]:
    """``key`` (dotted) of the ``KEY=VALUE`` overrides, else of the YAML file ``config``."""
    for source in (parse_overrides(list(overrides)),
                   read_yaml(config) if config and os.path.isfile(config) else None):
        node: object = source
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node:
            return [str(p) for p in node] if isinstance(node, list) else [str(node)]
    return []


def check_file(path: str, what: str) -> None:
    """One local file a command reads whole (a benchmark copy, a seed list): empty, binary
    where text is expected, or a head that does not decode in its format; raises
    :class:`InputProblem` naming ``what`` it was meant to be."""
    if fs.is_remote(path) or not os.path.isfile(path):
        return
    if _size(path) == 0:
        raise InputProblem(f"{what}: {path}: empty (0 bytes)")
    fmt = file_format(path)
    problem = _head_problem(path) if fmt else (f"{path}: binary data" if _looks_binary(path) else "")
    if problem:
        raise InputProblem(f"{what}: {problem}")


def _parquet_magic(path: str) -> bool:
    """``PAR1`` at both ends: the cheapest test that a file is Parquet (no reader imported)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(-4, os.SEEK_END)
            return head == b"PAR1" and fh.read(4) == b"PAR1"
    except OSError:
        return False


def _exists(pattern: str) -> None:
    """A path that is not there, with the look-alikes beside it (a typo)."""
    if fs.is_remote(pattern) or fs.has_glob(pattern) or fs.exists(pattern):
        return
    folder, name = os.path.split(os.path.abspath(pattern))
    hint = ""
    if os.path.isdir(folder):
        near = difflib.get_close_matches(name, os.listdir(folder), n=3, cutoff=0.8)
        if near:
            hint = "; did you mean " + " or ".join(os.path.join(os.path.dirname(pattern), n) for n in near) + "?"
    elif folder:
        hint = f"; its folder {os.path.dirname(pattern) or folder} does not exist either"
    raise InputProblem(f"input not found: {pattern}{hint}")


def _dataset_kept_something(pattern: str) -> None:
    """A finished afm dataset of no document: say which run wrote it and that it kept nothing."""
    if fs.is_remote(pattern) or fs.has_glob(pattern) or not os.path.isdir(pattern):
        return
    names = os.listdir(pattern)
    if not is_dataset_dir(pattern, names) or MANIFEST not in names or "_SUCCESS" not in names:
        return
    try:
        manifest = json.loads(fs.read_bytes(fs.join(pattern, MANIFEST)))
    except (OSError, ValueError):
        return
    totals = manifest.get("totals") or {}
    if totals.get("kept") == 0:
        command = manifest.get("command") or "the run that wrote it"
        raise InputProblem(f"{pattern} holds no document: `afm {command}` kept none of the {totals.get('in', 0)} "
                           f"it read ({totals.get('rejected', 0)} rejected; written with --allow-empty). "
                           f"See {fs.join(pattern, 'report.html')} or its rejects, and fix that step first")


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1  # cannot be read: the head check says why


def _head_problem(path: str, shapes: dict[str, str] = SHAPES) -> str:
    """Why the head of ``path`` does not decode in its format, or ''."""
    fmt = file_format(path) or "jsonl"
    decoded = failures = 0
    first: Failure | None = None
    try:
        for item in read_file(path):
            if isinstance(item, (Record, Skipped)):
                decoded += 1
            elif isinstance(item, Failure):
                failures += 1
                first = first or item
            if decoded + failures >= SAMPLE_RECORDS or decoded:
                break
    except ValueError as exc:  # a name of no supported format
        return f"{exc}; afm reads {', '.join(SUPPORTED_SUFFIXES)}"
    if decoded or first is None:
        if not decoded and fmt == "parquet":
            return f"{path}: a Parquet file of no rows; expected {shapes['parquet']}"
        return ""
    if first.reason == "unreadable_file":
        if first.error.startswith(("PermissionError", "FileNotFoundError", "IsADirectoryError", "OSError")):
            return f"{path}: cannot be read ({first.error})"
        return f"{path}: not a readable {fmt.upper()} file ({first.error[:160]}); expected {shapes[fmt]}"
    kind = "binary data" if _looks_binary(path) else f"not {fmt.upper()} ({first.reason}: {first.error[:120]})"
    return f"{path}: {kind} at {first.where.describe().split(', ', 1)[-1]}; expected {shapes[fmt]}"


def _looks_binary(path: str) -> bool:
    """NUL bytes in the first bytes (after gzip): not text of any kind."""
    import gzip

    try:
        with fs.open_read(path) as fh:
            head = fh.read(BINARY_PROBE)
            if head[:2] == b"\x1f\x8b":
                fh.seek(0)
                with gzip.open(fh) as inner:
                    head = inner.read(BINARY_PROBE)
    except (OSError, EOFError):
        return False
    return b"\x00" in head


__all__ = ["InputProblem", "check_data_paths", "check_file", "check_inputs"]
