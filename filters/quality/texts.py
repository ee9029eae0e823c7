"""Good text of many kinds, as the quality stage sees it, with where each text comes from.

A quality rule or model is only as fair as the text it was checked on. This module gathers
real, human-written text of the kinds a web corpus should keep, each labelled with its
source (the set), its kind (article, forum thread, documentation, manual page, README,
package description), its unit (the site, package or manual page: splits keep a unit on
one side) and its topic (:mod:`afm.filters.quality.topics`):

* **main texts of gold pages** (:mod:`afm.filters.extraction.gold`): the human-made main
  text of each page, i.e. what a perfect extractor hands the quality stage;
* **manual pages** found on this machine (``/usr/share/man``, English and translated),
  rendered to plain text with groff, one paragraph a line as an HTML rendering extracts;
* **package documentation** shipped on this machine: READMEs under ``/usr/share/doc``,
  and the descriptions and Markdown / reStructuredText documents of installed Python
  packages (what PyPI and GitHub show as a project's page), as their authors wrote them;
* **API reference pages** of the Python standard library, laid out from its docstrings.

Nothing here is shipped: the texts are read where they are. Which sets a rule or a model
may be chosen on and which it is reported on is the caller's choice; the recipe of the
shipped default (:mod:`afm.filters.quality.defaults`) and ``docs/quality.md`` say which.
"""

from __future__ import annotations

import ast
import email
import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from afm.filters.extraction.gold import GoldPage
from afm.filters.quality.topics import topic_of

MIN_WORDS = 50
MAX_CHARS = 20_000  # as the classifiers see it
_BLANKS = re.compile(r"\n\s*\n+")
_SPACES = re.compile(r"[ \t]+")
_BOX = re.compile(r"[\u2500-\u257f]+")  # a table's box drawing: no text of its own
_RUNNING_HEAD = re.compile(r"^.*\s{3,}\S+\(\w+\)$|^\S+\(\w+\)$")
_FAMILY = re.compile(r"[-_.]")


@dataclass(frozen=True)
class KindText:
    """One real text with what is known of it."""

    text: str
    source: str  # the set: scrapinghub, utomo-big5, wcxb, manpages, usr-share-doc, python-packages
    kind: str  # article, forum, documentation, service, manual, readme, description, ...
    unit: str  # the site, package or manual page (splits keep a unit on one side)
    id: str
    language: str = ""  # when the set says (a translated manual page's folder); else ""
    topic: str = ""

    def with_topic(self) -> KindText:
        return self if self.topic else replace(self, topic=topic_of(self.text))


def _site(url: str | None, fallback: str) -> str:
    host = urlsplit(url).hostname if url else None
    return (host or fallback).removeprefix("www.")


def gold_texts(pages: Iterable[GoldPage], *, min_words: int = MIN_WORDS,
               kinds: Sequence[str] | None = None) -> list[KindText]:
    """The human-made main text of every gold page with one (at least ``min_words``
    words): source = the set's family (``wcxb``, ``scrapinghub``) or, for Utomo & Leu's
    two sets, the set; kind = the page type (``wcxb-forum`` -> ``forum``; ``article`` for
    sets of articles); unit = the page's site (Utomo's pages carry no URL: the query or
    the news site's folder, so a site's pages stay together)."""
    out = []
    for page in pages:
        text = (page.truth or "").strip()
        if len(text.split()) < min_words:
            continue
        family, _, kind = page.set.partition("-")
        source = page.set if family == "utomo" else family
        if family == "utomo":
            kind, unit = "article", page.id.split("/")[0] if kind == "big5" else page.id.split(" (")[0]
        else:
            kind, unit = kind or "article", _site(page.url, f"{page.set}/{page.id}")
        if kinds is not None and kind not in kinds:
            continue
        out.append(KindText(text[:MAX_CHARS], source, kind, unit, f"{page.set}/{page.id}").with_topic())
    return out


def _order(name: str, seed: int) -> bytes:
    return hashlib.sha256(f"{seed}:{name}".encode()).digest()


def _read_maybe_gz(path: Path, limit: int = 2_000_000) -> str:
    raw = path.read_bytes()[:limit]
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError):
            return ""
    return raw.decode("utf-8", "replace")


def render_man_page(source: str, *, timeout: float = 20.0) -> str:
    """A manual page's roff source as plain text, one paragraph a line (groff with a very
    long line length, no justification, no hyphenation, no overstriking; the source read
    as UTF-8, as the translated pages are written), table rules
    dropped and whitespace folded: close to what extraction makes of an HTML rendering of
    the page."""
    groff = shutil.which("groff")
    if groff is None:
        raise FileNotFoundError("groff is not installed (needed to render manual pages)")
    run = subprocess.run(  # noqa: S603 - a fixed program, the page on stdin
        [groff, "-k", "-Kutf-8", "-t", "-man", "-Tutf8", "-rLL=2000n", "-rHY=0", "-dAD=l", "-P-cbou"],
        input=source.encode("utf-8", "replace"), capture_output=True, timeout=timeout, check=False)
    text = _BOX.sub(" ", run.stdout.decode("utf-8", "replace"))
    # The running header and footer (NAME(1) ... NAME(1); version, date, NAME(1)) are page
    # chrome, not documentation; then whitespace is folded as a browser folds it (tables
    # are padded to a 2000-column page).
    lines = [_SPACES.sub(" ", line).strip() for line in text.splitlines() if not _RUNNING_HEAD.match(line.strip())]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def man_page_texts(root: str | Path = "/usr/share/man", *, sections: Sequence[str] = ("1", "3", "5", "8"),
                   languages: Sequence[str] = ("",), limit: int = 300, seed: int = 0,
                   min_words: int = MIN_WORDS, per_family: int = 1,
                   exclude_units: Iterable[str] = ()) -> list[KindText]:
    """Up to ``limit`` manual pages per language (``""``: English, the top folder; else the
    translation folder, e.g. ``de``), chosen by a seeded hash of the file name among
    ``sections``, at most ``per_family`` of a family (the name up to its first ``-``,
    ``_`` or ``.``: one installed SDK can hold thousands of generated pages of one
    template), none of the families ``exclude_units`` (another sample's, so two samples
    share no family), rendered by :func:`render_man_page`; stubs that only include another
    page (``.so``) and pages under ``min_words`` words are skipped."""
    excluded = set(exclude_units)
    out: list[KindText] = []
    for lang in languages:
        base = Path(root) / lang if lang else Path(root)
        files = [p for s in sections for p in (base / f"man{s}").glob("*") if p.is_file()]
        files.sort(key=lambda p: _order(p.name, seed))
        taken = 0
        families: dict[str, int] = {}
        for path in files:
            if taken >= limit:
                break
            name = path.name.removesuffix(".gz")
            family = _FAMILY.split(name, maxsplit=1)[0]
            if families.get(family, 0) >= per_family or family in excluded:
                continue
            src = _read_maybe_gz(path)
            if not src or src.lstrip().startswith(".so "):
                continue
            try:
                text = render_man_page(src)
            except (OSError, subprocess.SubprocessError):
                continue
            if len(text.split()) < min_words:
                continue
            out.append(KindText(text[:MAX_CHARS], "manpages", "manual", family, f"man/{lang or 'en'}/{name}",
                                language=lang).with_topic())
            families[family] = families.get(family, 0) + 1
            taken += 1
    return out


_DOC_NAMES = re.compile(r"^(readme|usage|faq|howto|tutorial|intro|guide|getting.started|overview|"
                        r"install|quickstart)[^/]*$", re.I)
_DOC_SUFFIXES = (".md", ".rst", ".txt", "")


def usr_share_doc_texts(root: str | Path = "/usr/share/doc", *, limit: int = 300, seed: int = 0,
                        min_words: int = MIN_WORDS) -> list[KindText]:
    """READMEs, FAQs, guides and tutorials of the system's packages (plain, Markdown or
    reStructuredText, gzipped or not), up to ``limit``, one package one unit; changelogs,
    copyright files and HTML are not documentation of this kind and are skipped."""
    files = []
    for path in Path(root).glob("*/**/*"):
        name = path.name.removesuffix(".gz")
        if path.is_file() and _DOC_NAMES.match(name) and Path(name).suffix.lower() in _DOC_SUFFIXES:
            files.append(path)
    files.sort(key=lambda p: _order(str(p.relative_to(root)), seed))
    out: list[KindText] = []
    for path in files:
        if len(out) >= limit:
            break
        text = _read_maybe_gz(path).strip()
        if len(text.split()) < min_words:
            continue
        package = path.relative_to(root).parts[0]
        out.append(KindText(text[:MAX_CHARS], "usr-share-doc", "readme", package,
                            f"doc/{path.relative_to(root)}").with_topic())
    return out


def site_packages_dirs() -> list[Path]:
    """This interpreter's site-packages folders."""
    return [Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]


def python_package_texts(roots: Sequence[str | Path] | None = None, *, limit: int = 400, seed: int = 0,
                         min_words: int = MIN_WORDS) -> list[KindText]:
    """What installed Python packages say of themselves: each distribution's long
    description (its README, from ``METADATA``; kind ``description``) and the Markdown and
    reStructuredText documents inside packages (kind ``guide``), up to ``limit``; the
    distribution or top-level package is the unit."""
    candidates: list[tuple[Path, str, str]] = []
    for root in [Path(r) for r in (roots or site_packages_dirs())]:
        for meta in root.glob("*.dist-info/METADATA"):
            candidates.append((meta, "description", meta.parent.name.split("-")[0].lower()))
        for doc in list(root.glob("*/**/*.md")) + list(root.glob("*/**/*.rst")):
            rel = doc.relative_to(root)
            if ".dist-info" in rel.parts[0] or "tests" in rel.parts or "test" in rel.parts:
                continue
            candidates.append((doc, "guide", rel.parts[0].lower()))
    candidates.sort(key=lambda c: _order(str(c[0]), seed))
    out: list[KindText] = []
    seen: set[str] = set()
    for path, kind, unit in candidates:
        if len(out) >= limit:
            break
        raw = path.read_text(encoding="utf-8", errors="replace")
        text = (email.message_from_string(raw).get_payload() if kind == "description" else raw)
        text = text.strip() if isinstance(text, str) else ""
        key = hashlib.sha1(text.encode()).hexdigest()
        if len(text.split()) < min_words or key in seen:
            continue
        seen.add(key)
        out.append(KindText(text[:MAX_CHARS], "python-packages", kind, unit, f"py/{unit}/{path.name}").with_topic())
    return out


def stdlib_reference_texts(root: str | Path | None = None, *, limit: int = 200, seed: int = 0,
                           min_words: int = MIN_WORDS) -> list[KindText]:
    """A reference page per module of this Python's standard library, made of what its
    authors wrote: the module's docstring, then each public function and class as its
    signature line (``name(args)``) and docstring, as a documentation site lays out an API
    reference (kind ``reference``). Sources are parsed, never imported."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    files = [p for p in base.glob("*.py") if not p.name.startswith("_")]
    files += [p for p in base.glob("*/__init__.py") if not p.parent.name.startswith(("_", "test", "idlelib"))]
    files.sort(key=lambda p: _order(p.name, seed))
    out: list[KindText] = []
    for path in files:
        if len(out) >= limit:
            break
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        parts = [ast.get_docstring(tree) or ""]
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                doc = ast.get_docstring(node)
                if doc:
                    args = ast.unparse(node.args) if isinstance(node, ast.FunctionDef) else ""
                    parts.append(f"{node.name}({args})\n{doc}")
        text = "\n\n".join(p.strip() for p in parts if p.strip())
        if len(text.split()) < min_words:
            continue
        module = path.parent.name if path.name == "__init__.py" else path.stem
        out.append(KindText(text[:MAX_CHARS], "python-stdlib", "reference", module, f"stdlib/{module}").with_topic())
    return out


def by(items: Iterable[KindText], key: Callable[[KindText], str]) -> dict[str, list[KindText]]:
    """``items`` grouped by ``key`` (e.g. ``lambda t: t.source``), groups in first-seen order."""
    out: dict[str, list[KindText]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


__all__ = ["KindText", "by", "gold_texts", "man_page_texts", "python_package_texts", "render_man_page",
           "site_packages_dirs", "stdlib_reference_texts", "usr_share_doc_texts"]
