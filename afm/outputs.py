"""The one output-directory policy of every command that writes a dataset.

A run never writes where readers look until it has finished:

1. :meth:`OutputDir.prepare` runs *before any computing*: a non-empty directory is
   refused unless ``overwrite`` (the message says whether it holds a finished run or an
   interrupted one), and a probe file is written, so an unwritable destination fails in a
   second, not after an hour of work.
2. Every file of the run is written into ``OUTPUT/.staging-<run id>/``.
3. :meth:`OutputDir.promote`, only after the run succeeded: the previous ``_SUCCESS`` is
   removed first (from then on readers refuse the directory), the previous contents are
   deleted (``overwrite``), the staged files are moved in, ``manifest.json`` is written,
   and ``_SUCCESS`` last. A crash at any point leaves either the old complete output or no
   ``_SUCCESS``, never a mix that looks complete.
4. :meth:`OutputDir.abort` removes the staging directory of a failed run.

``_SUCCESS`` is a small JSON file (run id, time, every file with its size), so
:func:`check_complete` can also tell a directory whose files were removed afterwards.
Readers of a dataset directory call :func:`check_complete` and refuse to read without it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from afm import fs
from afm.errors import UserError

SUCCESS = "_SUCCESS"
MANIFEST = "manifest.json"
STAGING_PREFIX = ".staging-"
T = TypeVar("T")


class OutputError(RuntimeError):
    """The output directory cannot be used (not empty, not writable, a file, ...)."""


class EmptyOutput(UserError):
    """A run whose inputs yielded no document (refused unless ``--allow-empty``)."""


def refuse_empty(command: str, kept: int, detail: str, allow_empty: bool) -> None:
    """The one rule for "nothing kept", for every command that writes a dataset (curate,
    dedup, decontam run, tokenize, quality filter): a run that keeps no document stops
    before promoting, whatever the cause (empty or unreadable inputs, or every document
    rejected by the stages), unless asked for with ``--allow-empty`` (an incremental dedup
    batch of known texts). ``detail`` says what was read and the commonest reasons. A
    dataset written empty on purpose is then refused as an input by the next step, which
    names the run that kept nothing (:mod:`afm.preflight`, the training data's loader)."""
    if kept == 0 and not allow_empty:
        raise EmptyOutput(f"{command} kept no document ({detail}); nothing was promoted. Check the inputs and "
                          "the settings that rejected them, or pass --allow-empty to write an empty dataset")


class IncompleteOutput(FileNotFoundError):
    """A dataset directory without ``_SUCCESS``: the run writing it did not finish.

    A :class:`FileNotFoundError` because a half-written output is as unusable as a missing
    one, and every command already reports those cleanly."""


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


# Kept across runs, ignored when deciding whether a directory is empty: the runs' logs
# (``afm.pipelines.beam.logs``), so a failed run's log stays to be read.
KEPT_ACROSS_RUNS = ("_logs",)


def _visible(names: Iterable[str]) -> list[str]:
    return [n for n in names if n and not n.startswith(STAGING_PREFIX)]


@dataclass
class OutputDir:
    """A dataset directory being written by one run (see the module docstring)."""

    path: str
    run_id: str
    overwrite: bool = False
    keep: tuple[str, ...] = ()  # names of this output a run keeps (``afm curate --urls``: its fetch)

    @property
    def staging(self) -> str:
        return fs.join(self.path, STAGING_PREFIX + self.run_id)

    def staged(self, name: str) -> str:
        """Where the run writes its file ``name`` until :meth:`promote`."""
        return fs.join(self.staging, name)

    @classmethod
    def prepare(cls, path: str | os.PathLike[str], *, overwrite: bool = False,
                run_id: str | None = None, keep: tuple[str, ...] = ()) -> OutputDir:
        """Check and claim ``path`` before computing (see the module docstring). ``keep``:
        names that belong to the run's own resumable work (``afm curate --urls`` keeps its
        fetch in ``fetch/``): neither counted as earlier output nor replaced."""
        path = str(path)
        if not fs.is_remote(path):
            path = os.path.abspath(path)
            if os.path.exists(path) and not os.path.isdir(path):
                raise OutputError(f"{path} is a file, not a directory")
        names = [n for n in fs.list_dir(path) if n not in KEPT_ACROSS_RUNS + tuple(keep)]
        if names and not overwrite:
            raise OutputError(describe_existing(path, names))
        out = cls(path, run_id or new_run_id(), overwrite, tuple(keep))
        probe = out.staged(".write-probe")
        try:
            fs.mkdirs(out.staging)
            with fs.open_write(probe) as fh:
                fh.write(b"afm")
            fs.delete([probe])
        except OSError as exc:
            fs.delete([out.staging])
            raise OutputError(f"cannot write to {path}: {exc.strerror or exc}") from exc
        return out

    def promote(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Move the staged files into place, then write ``manifest.json`` and ``_SUCCESS``
        (last). Returns the ``_SUCCESS`` content."""
        fs.delete([fs.join(self.path, SUCCESS)])
        # Hidden names in the staging directory are the run's scratch (temp files, stats).
        staged = [n for n in fs.list_dir(self.staging) if not n.startswith(".")]
        for name in fs.list_dir(self.path):
            if name in KEPT_ACROSS_RUNS + self.keep and name not in staged:
                continue
            if name != STAGING_PREFIX + self.run_id and (self.overwrite or name in staged
                                                          or name == MANIFEST):
                fs.delete([fs.join(self.path, name)])
        for name in staged:
            fs.rename(self.staged(name), fs.join(self.path, name))
        fs.delete([self.staging])
        fs.write_bytes(fs.join(self.path, MANIFEST),
                       json.dumps(manifest, indent=2, sort_keys=True, default=str).encode())
        files = {}
        for name in sorted(staged + [MANIFEST]):
            full = fs.join(self.path, name)
            files[name] = sum(fs.size(f) for f in fs.list_files(full)) if fs.isdir(full) \
                else fs.size(full)
        marker = {"run_id": self.run_id,
                  "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                  "files": files}
        fs.write_bytes(fs.join(self.path, SUCCESS),
                       json.dumps(marker, indent=1, sort_keys=True).encode())
        return marker

    def abort(self) -> None:
        """Remove what the failed run staged (the previous output, if any, is untouched)."""
        fs.delete([self.staging])


def write_directory(path: str | os.PathLike[str], write: Callable[[str], T], *,
                    overwrite: bool = False, manifest: dict[str, Any] | None = None) -> T:
    """The same rule for every command that writes a folder of files in one go (a
    tokenizer, a Hugging Face export, generated data): ``path`` is claimed before any
    work (non-empty: refused unless ``overwrite``), ``write(staging)`` fills a staging
    directory, and only a ``write`` that returned is promoted (``manifest.json``,
    ``_SUCCESS``); a failed one leaves the previous contents as they were. Returns what
    ``write`` returned."""
    out = OutputDir.prepare(path, overwrite=overwrite)
    try:
        result = write(out.staging)
    except BaseException:
        out.abort()
        raise
    out.promote(dict(manifest or {}))
    return result


def describe_existing(path: str, names: list[str]) -> str:
    """Why a non-empty directory is refused, and what to do about it."""
    staging = [n for n in names if n.startswith(STAGING_PREFIX)]
    if SUCCESS in names:
        return (f"{path} already holds a finished run (it has {SUCCESS}); pass --overwrite "
                "to replace it, or choose another output directory")
    if staging:
        return (f"{path} holds an interrupted run ({staging[0]}, no {SUCCESS}): nothing of it "
                "was promoted. Pass --overwrite to discard it and run again (a run cannot "
                "be resumed half-way), or choose another output directory")
    shown = ", ".join(_visible(names)[:5])
    return (f"{path} is not empty ({len(names)} entries: {shown}); pass --overwrite to replace "
            "its contents, or choose an empty directory")


def is_dataset_dir(path: str, names: list[str] | None = None) -> bool:
    """Whether ``path`` is (or was being written as) the output of an afm command."""
    names = fs.list_dir(path) if names is None else names
    return any(n in (SUCCESS, MANIFEST) or n.startswith(STAGING_PREFIX)
               or n.startswith(("documents-", "rejects-", "tokens-")) for n in names)


def check_complete(path: str, names: list[str] | None = None) -> dict[str, Any]:
    """The ``_SUCCESS`` content of a dataset directory; raises :class:`IncompleteOutput`
    (with the reason) when the run that wrote it did not finish. ``names``: the directory's
    listing when the caller has it already."""
    names = fs.list_dir(path) if names is None else names
    if SUCCESS not in names:
        staging = [n for n in names if n.startswith(STAGING_PREFIX)]
        why = (f"a run into it was interrupted ({staging[0]})" if staging else
               "the run that wrote it did not finish, or an afm version before _SUCCESS "
               "markers wrote it")
        raise IncompleteOutput(f"{path} has no {SUCCESS} marker: {why}. Its files may be "
                               "partial or mixed from two runs, so they are not read; run "
                               "the command that writes it again (with --overwrite)")
    try:
        marker = json.loads(fs.read_bytes(fs.join(path, SUCCESS)) or b"{}")
    except ValueError:
        marker = {}
    missing = [n for n in marker.get("files", {}) if n not in names]
    if missing:
        raise IncompleteOutput(f"{path}: files listed in {SUCCESS} are missing: {missing[:5]}")
    return marker
