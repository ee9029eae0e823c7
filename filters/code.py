"""Code source (AFM report §3.1.3): licence, language, quality heuristics, secret removal.

* **Licence**: a repository's licence is read from its LICENSE / LICENCE / COPYING /
  UNLICENSE files (recognised by their standard wording) and a file's own
  ``SPDX-License-Identifier`` header overrides it. Only the report's allow-list is kept:
  MIT, Apache, BSD, CC0, CC-BY, Unlicense, ISC, Artistic. SPDX expressions are honoured
  (``A OR B`` needs one allowed side, ``A AND B`` needs both).
* **Language** by file extension, for 14 languages: the eight the report names (Swift,
  Python, C, Objective-C, C++, JavaScript, Java, Go) and six chosen here for being the
  most common remaining languages of GitHub: TypeScript, Rust, Kotlin, C#, Ruby, PHP.
  ``.h`` headers are disambiguated by content (Objective-C / C++ markers, else C).
* **Quality** (the StarCoder filters): max and mean line length, alphanumeric fraction,
  auto-generated markers in the file head, and data-file detection (long encoded blobs:
  base64 / hex / unicode escapes, or files that are mostly digits).
* **Secrets and PII**: private keys, API keys/tokens of common providers, quoted values
  assigned to ``password``/``secret``/``token``/``api_key`` names, and e-mail addresses are
  replaced by placeholders (``<PRIVATE_KEY>``, ``<API_KEY>``, ``<SECRET>``, ``<EMAIL>``)
  and counted in ``pii_redactions``.

Code documents have ``source="code"``, the file path in ``title`` (and ``url``) and the
repository licence in the record's ``license`` key when the reader knows it (the shared
schema has no licence column; see :func:`iter_repo_files`).
"""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from afm.filters.base import Decision
from afm.parquet import open_parquet
from afm.schema import Document, make_document

# --------------------------------------------------------------------------- languages

LANGUAGE_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "swift": (".swift",),
    "python": (".py", ".pyi"),
    "c": (".c", ".h"),
    "objective-c": (".m", ".mm"),
    "cpp": (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp"),
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "java": (".java",),
    "go": (".go",),
    "typescript": (".ts", ".tsx", ".mts", ".cts"),
    "rust": (".rs",),
    "kotlin": (".kt", ".kts"),
    "csharp": (".cs",),
    "ruby": (".rb",),
    "php": (".php",),
}
LANGUAGES = tuple(LANGUAGE_EXTENSIONS)
_EXT_TO_LANG = {ext: lang for lang, exts in LANGUAGE_EXTENSIONS.items() for ext in exts}
_OBJC_MARKERS = re.compile(r"^\s*(?:@interface|@protocol|@implementation|#import\b)", re.M)
_CPP_MARKERS = re.compile(r"\b(?:namespace\s+\w+|template\s*<|class\s+\w+\s*[:{]|std::|public:|private:)")


def language_of(path: str, text: str = "") -> str | None:
    """The language of a file from its extension (``.h`` decided by its content)."""
    ext = PurePosixPath(path.lower()).suffix
    lang = _EXT_TO_LANG.get(ext)
    if ext == ".h" and text:
        if _OBJC_MARKERS.search(text):
            return "objective-c"
        if _CPP_MARKERS.search(text):
            return "cpp"
    return lang


# --------------------------------------------------------------------------- licences

# Ordered: the first matching signature names the licence (more specific ones first).
_LICENSE_SIGNATURES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    # (spdx id, all of these phrases, none of these phrases); matched on lowercased text
    ("AGPL-3.0", ("gnu affero general public license",), ()),
    ("LGPL-3.0", ("gnu lesser general public license",), ()),
    ("GPL-3.0", ("gnu general public license", "version 3"), ()),
    ("GPL-2.0", ("gnu general public license",), ()),
    ("MPL-2.0", ("mozilla public license",), ()),
    ("Apache-2.0", ("apache license", "version 2.0"), ()),
    ("Unlicense", ("this is free and unencumbered software released into the public domain",), ()),
    ("CC0-1.0", ("cc0 1.0 universal",), ()),
    ("CC-BY-NC-4.0", ("creative commons", "noncommercial"), ()),
    ("CC-BY-ND-4.0", ("creative commons", "noderivatives"), ()),
    ("CC-BY-SA-4.0", ("creative commons attribution-sharealike",), ()),
    ("CC-BY-4.0", ("creative commons attribution 4.0",), ()),
    ("CC-BY-3.0", ("creative commons attribution 3.0",), ()),
    ("ISC", ("permission to use, copy, modify, and", "distribute this software for any purpose"), ()),
    ("MIT", ("permission is hereby granted, free of charge",), ()),
    ("BSD-3-Clause", ("redistribution and use in source and binary forms", "neither the name"), ()),
    ("BSD-2-Clause", ("redistribution and use in source and binary forms",), ()),
    ("Artistic-2.0", ("artistic license 2.0",), ()),
    ("Artistic-1.0", ("the artistic license",), ()),
    ("BSL-1.0", ("boost software license",), ()),
)
# The report's allow-list, as SPDX id patterns.
DEFAULT_ALLOWED_LICENSES = (
    r"MIT(-0)?",
    r"Apache-\d\.\d",
    r"0?BSD(-\d-Clause.*)?",
    r"CC0-1\.0",
    r"CC-BY-\d\.\d",
    r"Unlicense",
    r"ISC",
    r"Artistic-\d\.\d.*",
)
LICENSE_FILE = re.compile(r"^(?:un)?licen[cs]e(?:[-._].*)?$|^copying(?:[-._].*)?$", re.I)
_SPDX = re.compile(r"SPDX-License-Identifier:\s*([^\n\r]+?)\s*(?:\*/|-->|#\}|$)", re.M)


def detect_license(text: str) -> str | None:
    """The SPDX id of a licence text (by its standard wording), or None if unrecognised."""
    low = " ".join(text.lower().split())
    for spdx, required, forbidden in _LICENSE_SIGNATURES:
        if all(p in low for p in required) and not any(p in low for p in forbidden):
            return spdx
    return None


def spdx_header(text: str, max_lines: int = 50) -> str | None:
    """The ``SPDX-License-Identifier`` expression in a file's first lines, if any."""
    head = "\n".join(text.splitlines()[:max_lines])
    m = _SPDX.search(head)
    return m.group(1).strip() if m else None


def license_allowed(expression: str | None, allowed: tuple[str, ...] | list[str] = DEFAULT_ALLOWED_LICENSES) -> bool:
    """Whether an SPDX expression is acceptable: ``OR`` needs one allowed alternative,
    ``AND`` needs every part allowed; ``WITH`` exceptions and parentheses are ignored."""
    if not expression:
        return False
    pattern = re.compile("^(?:" + "|".join(allowed) + r")(?:\+|-only|-or-later)?$", re.I)
    expr = re.sub(r"[()]", " ", expression)
    expr = re.sub(r"\s+WITH\s+\S+", " ", expr, flags=re.I)
    for alternative in re.split(r"\s+OR\s+", expr.strip(), flags=re.I):
        parts = [p for p in re.split(r"\s+AND\s+", alternative.strip(), flags=re.I) if p]
        if parts and all(pattern.match(p.strip()) for p in parts):
            return True
    return False


def repo_license(repo_dir: str | os.PathLike[str]) -> str | None:
    """The licence of a checked-out repository from its top-level licence files:
    ``None`` when there is none, ``"unknown"`` when present but unrecognised, several
    licences joined with ``AND`` (every one must be allowed)."""
    found: list[str] = []
    root = Path(repo_dir)
    for p in sorted(root.iterdir()):
        if p.is_file() and LICENSE_FILE.match(p.name):
            try:
                text = p.read_text(encoding="utf-8", errors="replace")[:200_000]
            except OSError:
                continue
            found.append(detect_license(text) or "unknown")
    if not found:
        return None
    return " AND ".join(dict.fromkeys(found))


# --------------------------------------------------------------------------- secrets / PII

_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        re.S), "<PRIVATE_KEY>"),
    ("api_key", re.compile(
        r"\b(?:(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
        r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
        r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
        r"|AIza[0-9A-Za-z_\-]{35}"  # Google
        r"|[sr]k_live_[0-9A-Za-z]{20,}"  # Stripe
        r"|sk-[A-Za-z0-9_\-]{32,})"  # OpenAI-style
        r"(?![A-Za-z0-9_\-])"), "<API_KEY>"),
)
_ASSIGNED_SECRET = re.compile(
    r"(?i)(\b[\w.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key)[\w-]*[\"']?\s*[:=]\s*)"
    r"([\"'])([^\"'\s]{8,})\2"
)
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_EXAMPLE_DOMAINS = re.compile(r"@(?:[\w-]+\.)*example\.(?:com|org|net)$", re.I)


def redact_secrets(text: str, emails: bool = True) -> tuple[str, dict[str, int]]:
    """Replace keys, assigned secrets and (optionally) e-mail addresses by placeholders;
    returns the new text and the count per kind."""
    counts: dict[str, int] = {}
    for kind, pattern, placeholder in _SECRET_PATTERNS:
        text, n = pattern.subn(placeholder, text)
        if n:
            counts[kind] = n

    def _assigned(m: re.Match[str]) -> str:
        if m.group(3).startswith("<") or m.group(3).startswith("${"):
            return m.group(0)  # already a placeholder / a template variable
        counts["secret"] = counts.get("secret", 0) + 1
        return f"{m.group(1)}{m.group(2)}<SECRET>{m.group(2)}"

    text = _ASSIGNED_SECRET.sub(_assigned, text)
    if emails:
        def _email(m: re.Match[str]) -> str:
            if _EXAMPLE_DOMAINS.search(m.group(0)):
                return m.group(0)
            counts["email"] = counts.get("email", 0) + 1
            return "<EMAIL>"

        text = _EMAIL.sub(_email, text)
    return text, counts


# --------------------------------------------------------------------------- quality

_AUTOGEN = re.compile(
    r"auto[- ]?generated|automatically generated|generated by|do not edit|don't edit"
    r"|code generator|@generated", re.I)
_ENCODED = (
    re.compile(r"[A-Za-z0-9+/\n=]{64,}"),  # base64
    re.compile(r"(?:\b(?:0x|\\x)?[0-9a-fA-F]{2}(?:,|\b\s*)){8,}"),  # hex bytes
    re.compile(r"(?:\\u[0-9a-fA-F]{4}){8,}"),  # unicode escapes
)


def encoded_data_stats(text: str) -> tuple[float, int]:
    """(share of characters inside encoded-data matches, longest match) (StarCoder)."""
    covered = bytearray(len(text))
    longest = 0
    for pattern in _ENCODED:
        for m in pattern.finditer(text):
            covered[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
            longest = max(longest, m.end() - m.start())
    return (sum(covered) / len(text) if text else 0.0), longest


@dataclass
class CodeConfig:
    """Code filter parameters; quality thresholds are StarCoder's (``None`` = rule off)."""

    languages: list[str] = field(default_factory=lambda: list(LANGUAGES))
    require_license: bool = True
    allowed_licenses: list[str] = field(default_factory=lambda: list(DEFAULT_ALLOWED_LICENSES))
    max_line_length: int | None = 1000
    max_mean_line_length: float | None = 100.0
    min_alnum_fraction: float | None = 0.25
    autogen_head_lines: int | None = 5  # look for "auto-generated" markers in these lines
    max_encoded_fraction: float | None = 0.5
    max_encoded_run: int | None = 1024
    max_digit_fraction: float | None = 0.5  # digits among non-space characters
    redact_secrets: bool = True
    redact_emails: bool = True


def code_path(doc: Document) -> str:
    """The file path of a code document: its ``title``, else the path part of its URL."""
    if doc.get("title"):
        return str(doc["title"])
    url = doc.get("url") or ""
    return url.split("?", 1)[0]


class CodeFilter:
    """Licence, language and quality filter plus secret removal for ``source="code"``
    documents; documents of other sources pass untouched."""

    name = "code"

    def __init__(self, cfg: CodeConfig | None = None) -> None:
        self.cfg = cfg or CodeConfig()
        unknown = set(self.cfg.languages) - set(LANGUAGES)
        if unknown:
            raise ValueError(f"unknown code languages {sorted(unknown)}; known: {list(LANGUAGES)}")

    def signals(self, text: str) -> dict[str, float]:
        lines = text.splitlines() or [""]
        lengths = [len(x) for x in lines]
        non_space = [c for c in text if not c.isspace()]
        enc_frac, enc_run = encoded_data_stats(text)
        head = "\n".join(lines[: self.cfg.autogen_head_lines or 0])
        return {
            "code_lines": float(len(lines)),
            "code_max_line_length": float(max(lengths)),
            "code_mean_line_length": sum(lengths) / len(lengths),
            "code_alnum_fraction": sum(c.isalnum() for c in text) / max(len(text), 1),
            "code_autogenerated": float(bool(_AUTOGEN.search(head))),
            "code_encoded_fraction": enc_frac,
            "code_encoded_max_run": float(enc_run),
            "code_digit_fraction": sum(c.isdigit() for c in non_space) / max(len(non_space), 1),
        }

    def __call__(self, doc: Document) -> Decision:
        if doc.get("source") != "code":
            return Decision(keep=True)
        cfg = self.cfg
        text = doc.get("text") or ""
        path = code_path(doc)
        lang = language_of(path, text)
        header = spdx_header(text)
        lic = header or doc.get("license")  # type: ignore[call-overload]
        allowed = license_allowed(lic, cfg.allowed_licenses)
        sig = self.signals(text)
        sig["code_license_allowed"] = float(allowed)
        details: dict[str, Any] = {"path": path, "language": lang, "license": lic}
        if not text.strip():
            return Decision(keep=False, reason="code_empty", signals=sig, details=details)
        if lang is None or lang not in cfg.languages:
            return Decision(keep=False, reason="code_language", signals=sig, details=details)
        if cfg.require_license and not allowed:
            reason = "code_license_missing" if not lic else "code_license_not_allowed"
            return Decision(keep=False, reason=reason, signals=sig, details=details)
        checks = (
            ("code_autogenerated", cfg.autogen_head_lines is not None and sig["code_autogenerated"] > 0),
            ("code_max_line_length", cfg.max_line_length is not None
             and sig["code_max_line_length"] > cfg.max_line_length),
            ("code_mean_line_length", cfg.max_mean_line_length is not None
             and sig["code_mean_line_length"] > cfg.max_mean_line_length),
            ("code_alnum_fraction", cfg.min_alnum_fraction is not None
             and sig["code_alnum_fraction"] < cfg.min_alnum_fraction),
            ("code_encoded_data", (cfg.max_encoded_fraction is not None
             and sig["code_encoded_fraction"] > cfg.max_encoded_fraction)
             or (cfg.max_encoded_run is not None and sig["code_encoded_max_run"] > cfg.max_encoded_run)),
            ("code_digit_fraction", cfg.max_digit_fraction is not None
             and sig["code_digit_fraction"] > cfg.max_digit_fraction),
        )
        failed = [name for name, bad in checks if bad]
        if failed:
            return Decision(keep=False, reason=failed[0], signals=sig,
                            details={**details, "failed_rules": failed})
        out = dict(doc)
        out["language"] = lang
        if cfg.redact_secrets:
            new_text, counts = redact_secrets(text, emails=cfg.redact_emails)
            if counts:
                out["text"] = new_text
                merged = dict(out.get("pii_redactions") or {})
                for kind, n in counts.items():
                    merged[f"code_{kind}"] = merged.get(f"code_{kind}", 0) + n
                out["pii_redactions"] = merged
            sig["code_redactions"] = float(sum(counts.values()))
        return Decision(keep=True, signals=sig, document=out)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- readers


def _origin_name(repo: Path) -> str:
    """``owner/name`` from the repository's origin URL, else the directory name."""
    cfg_file = repo / ".git" / "config"
    if cfg_file.is_file():
        parser = configparser.ConfigParser(strict=False)
        try:
            parser.read(cfg_file, encoding="utf-8")
            url = parser.get('remote "origin"', "url", fallback="")
        except (configparser.Error, UnicodeDecodeError):
            url = ""
        m = re.search(r"[:/]([^/:]+/[^/]+?)(?:\.git)?/?$", url)
        if m:
            return m.group(1)
    return repo.name


def _decode(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return None  # binary
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _code_document(text: str, repo: str, path: str, lic: str | None) -> Document:
    doc = make_document(text, url=f"{repo}/{path}", source="code", title=path)
    doc["license"] = lic  # type: ignore[typeddict-unknown-key]
    return doc


def iter_repo_files(
    repo_dir: str | os.PathLike[str],
    max_bytes: int = 1_000_000,
    stats: dict[str, int] | None = None,
) -> Iterator[Document]:
    """Code documents from a directory of cloned repositories (one per subdirectory; a
    directory that is itself a repository, with ``.git``, also works).

    Only files with one of the 14 languages' extensions are read; each document carries
    its repository's licence (``license`` key, from the LICENSE/COPYING files). Files
    skipped before becoming documents (too large, binary, not UTF-8) are counted in
    ``stats`` under ``skipped_<why>`` so nothing vanishes unaccounted.
    """
    root = Path(repo_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"repository directory not found: {root}")
    stats = stats if stats is not None else {}
    repos = [root] if (root / ".git").exists() else sorted(
        p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    for repo in repos:
        lic = repo_license(repo)
        name = _origin_name(repo)
        stats["repos"] = stats.get("repos", 0) + 1
        for dirpath, dirnames, filenames in os.walk(repo):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
            for fname in sorted(filenames):
                full = Path(dirpath) / fname
                rel = full.relative_to(repo).as_posix()
                if PurePosixPath(fname.lower()).suffix not in _EXT_TO_LANG:
                    stats["skipped_not_code"] = stats.get("skipped_not_code", 0) + 1
                    continue
                try:
                    size = full.stat().st_size
                    if size > max_bytes:
                        stats["skipped_too_large"] = stats.get("skipped_too_large", 0) + 1
                        continue
                    text = _decode(full.read_bytes())
                except OSError:
                    stats["skipped_unreadable"] = stats.get("skipped_unreadable", 0) + 1
                    continue
                if text is None:
                    stats["skipped_binary_or_not_utf8"] = stats.get("skipped_binary_or_not_utf8", 0) + 1
                    continue
                stats["files"] = stats.get("files", 0) + 1
                yield _code_document(text, name, rel, lic)


def iter_parquet_files(
    path: str | os.PathLike[str],
    batch_size: int = 1024,
    stats: dict[str, int] | None = None,
) -> Iterator[Document]:
    """Code documents from a Parquet of files with columns ``path``, ``content``, ``repo``
    (and optionally ``license``). Without a ``license`` column, a repository's licence is
    detected from its LICENSE/COPYING rows in the same file (a first, light pass). Rows
    that are not code files of the 14 languages are counted in ``stats``."""
    stats = stats if stats is not None else {}
    pf = open_parquet(path)
    names = set(pf.schema_arrow.names)
    missing = {"path", "content", "repo"} - names
    if missing:
        raise ValueError(f"{path}: missing column(s) {sorted(missing)}; have {sorted(names)}")
    has_license = "license" in names
    licenses: dict[str, list[str]] = {}
    if not has_license:
        for batch in pf.iter_batches(batch_size=batch_size, columns=["path", "content", "repo"]):
            for row in batch.to_pylist():
                p = row["path"] or ""
                if "/" not in p.strip("/") and LICENSE_FILE.match(PurePosixPath(p).name):
                    found = detect_license(row["content"] or "") or "unknown"
                    licenses.setdefault(row["repo"], []).append(found)
    columns = ["path", "content", "repo"] + (["license"] if has_license else [])
    for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
        for row in batch.to_pylist():
            p = row["path"] or ""
            if PurePosixPath(p.lower()).suffix not in _EXT_TO_LANG:
                stats["skipped_not_code"] = stats.get("skipped_not_code", 0) + 1
                continue
            stats["files"] = stats.get("files", 0) + 1
            repo = row["repo"] or ""
            if has_license:
                lic = row["license"]
            else:
                found = licenses.get(repo)
                lic = " AND ".join(dict.fromkeys(found)) if found else None
            yield _code_document(row["content"] or "", repo, p, lic)
