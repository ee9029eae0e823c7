"""Pages with human-made (or human-reviewed) gold text, one loader per public set, and
the one metric every extraction figure uses.

Sets (where each comes from and its licence: ``data/extraction/README.md``):

* ``scrapinghub``: 181 article pages, ``../shared/eval/extraction`` (MIT).
* ``wcxb-<type>``: the WCXB development split (CC-BY-4.0), one set per page type
  (article, forum, product, collection, listing, documentation, service); the held-out
  WCXB test split is never read.
* ``trafilatura``: trafilatura's own evaluation pages (Apache-2.0); its gold is snippets
  that must / must not appear rather than a whole text.
* ``utomo-big5`` / ``utomo-chaos``: Utomo & Leu's web content extraction sets (the
  ``Extraction`` folder of github.com/MSVCode/ir-research-data, research use): 360 news
  pages of 9 sites over 2005-2017, and 360 pages of ~240 sites from Google results for
  36 queries, each with a human-made gold text. One source (``utomo``) for
  cross-validation: one team's gold conventions.
* ``googletrends``: Google-Trends-2017, BoilerNet's 180 hand-labelled English pages (news,
  entertainment, sport; the ``datasets/googletrends`` folder of BoilerNet's first commit,
  GPL-3.0 repository, third-party pages), the ``main`` label's text as gold.
* ``fundus``: the news pages of Fundus's parser tests (MIT repository, third-party pages):
  one or more pages of ~180 publishers in ~40 countries, each with the article body its
  hand-written per-publisher parser must return (summary, section headlines, paragraphs);
  a page's gold must be visible in its HTML (``FUNDUS_MIN_VISIBLE``) and long enough for
  the shingle metric (``FUNDUS_MIN_TOKENS``).

Metric (ScrapingHub's article-extraction benchmark): ``\\w+`` tokens, 4-token shingles,
per-page TP/FP/FN normalised to sum 1, precision and recall averaged over pages, F1 of
the two averages. A snippet page counts snippets the same way: a "with" snippet found is
a TP, missed an FN; a "without" snippet found is an FP.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.errors import UserError
from afm.filters.extraction.decode import decode_html, meta_charset

_TOKEN = re.compile(r"\w+")
_WS = re.compile(r"\s+")

WCXB_TYPES = ("article", "forum", "product", "collection", "listing", "documentation", "service")


@dataclass
class GoldPage:
    """One page: its raw bytes and its gold (a whole text, or snippets)."""

    set: str
    id: str
    url: str | None
    body: bytes
    truth: str | None = None  # whole gold text (shingle metric)
    with_: list[str] = field(default_factory=list)  # snippets that must appear
    without: list[str] = field(default_factory=list)  # snippets that must not


# ---------------------------------------------------------------------------- metric


def shingles(text: str, n: int = 4) -> Counter:
    """Multiset of n-token shingles (a text shorter than n is one shingle)."""
    toks = _TOKEN.findall(text or "")
    return Counter(tuple(toks[i: i + n]) for i in range(max(1, len(toks) - n + 1)) if toks[i: i + n])


def page_counts(truth: str, pred: str) -> tuple[float, float, float]:
    """Normalised (tp, fp, fn) of one page; they sum to 1 unless both texts are empty."""
    a, b = shingles(truth), shingles(pred)
    tp = fp = fn = 0
    for key in a.keys() | b.keys():
        t, p = a.get(key, 0), b.get(key, 0)
        tp += min(t, p)
        fp += max(0, p - t)
        fn += max(0, t - p)
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def _fold(text: str) -> str:
    return _WS.sub(" ", text).strip().lower()


def snippet_counts(with_: list[str], without: list[str], pred: str) -> tuple[float, float, float]:
    """Normalised (tp, fp, fn) from snippets (whitespace and case folded)."""
    text = _fold(pred)
    tp = sum(_fold(s) in text for s in with_)
    fn = len(with_) - tp
    fp = sum(_fold(s) in text for s in without)
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def counts(page: GoldPage, pred: str) -> tuple[float, float, float]:
    """The page's (tp, fp, fn) under its set's gold."""
    if page.truth is not None:
        return page_counts(page.truth, pred)
    return snippet_counts(page.with_, page.without, pred)


def page_f1(row: tuple[float, float, float]) -> float:
    """F1 of one page's counts (the per-page target the selector learns)."""
    tp, fp, fn = row
    return 2 * tp / (2 * tp + fp + fn) if tp else (1.0 if fp == fn == 0 else 0.0)


def _precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    return 0.0 if tp == fp == 0 else tp / (tp + fp)


def _recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    return 0.0 if tp == fn == 0 else tp / (tp + fn)


def extraction_scores(rows: list[tuple[float, float, float]]) -> dict[str, float]:
    """Benchmark precision/recall (page averages) and their F1."""
    ps = [_precision(*r) for r in rows if r[0] + r[1] > 0]
    rs = [_recall(*r) for r in rows if r[0] + r[2] > 0]
    p = statistics.mean(ps) if ps else 0.0
    r = statistics.mean(rs) if rs else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


# ---------------------------------------------------------------------------- loaders


def load_scrapinghub(eval_dir: Path, limit: int | None = None) -> list[GoldPage]:
    """The 181 pages of ``eval/extraction`` (``eval_dir`` is ``../shared/eval``)."""
    root = eval_dir / "extraction"
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for page_id in sorted(truth)[:limit]:
        path = root / "html" / f"{page_id}.html.gz"
        if path.exists():
            pages.append(GoldPage("scrapinghub", page_id, truth[page_id].get("url"),
                                  gzip.decompress(path.read_bytes()),
                                  truth=truth[page_id].get("articleBody") or ""))
    return pages


def load_wcxb(root: Path, limit: int | None = None, split: str = "dev") -> list[GoldPage]:
    """WCXB's development split (``root`` holds ``dev/html`` and ``dev/ground-truth``), or
    its ``test`` split, one set per page type."""
    pages = []
    for gt_path in sorted((root / split / "ground-truth").glob("*.json"))[:limit]:
        gt = json.loads(gt_path.read_text(encoding="utf-8"))
        html = root / split / "html" / f"{gt_path.stem}.html.gz"
        if not html.exists():
            continue
        kind = ((gt.get("_internal") or {}).get("page_type") or {}).get("primary") or "article"
        truth = (gt.get("ground_truth") or {}).get("main_content") or ""
        pages.append(GoldPage(f"wcxb-{kind}", gt_path.stem, gt.get("url"),
                              gzip.decompress(html.read_bytes()), truth=truth))
    return pages


def load_wcxb_all(root: Path) -> list[GoldPage]:
    """Both of WCXB's splits, each page once (139 test pages repeat dev pages)."""
    pages = load_wcxb(root)
    seen = {p.id for p in pages}
    if (root / "test").is_dir():
        pages += [p for p in load_wcxb(root, split="test") if p.id not in seen]
    return pages


def load_trafilatura_eval(root: Path, limit: int | None = None) -> list[GoldPage]:
    """trafilatura's evaluation pages: ``root/evaldata.json`` and the HTML files in
    ``root/eval`` and ``root/cache`` (the layout of its ``tests`` folder)."""
    data = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url, item in sorted(data.items())[:limit]:
        for folder in ("eval", "cache"):
            path = root / folder / item["file"]
            if path.exists():
                pages.append(GoldPage("trafilatura", item["file"], url, path.read_bytes(),
                                      with_=list(item.get("with") or []),
                                      without=list(item.get("without") or [])))
                break
    return pages


def _read_text(path: Path) -> str:
    """A gold text file: UTF-8, else Windows-1252 (some of the older pages' gold)."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("cp1252", "replace")


def load_utomo(root: Path, limit: int | None = None) -> list[GoldPage]:
    """Utomo & Leu's sets (``root`` is the repository's ``Extraction`` folder): every
    ``<folder>/html/<name>.htm[l]`` with its ``<folder>/gold/<name>.txt``; the ``big5-*``
    folders (one per year) are the set ``utomo-big5``, ``chaos-all`` is ``utomo-chaos``."""
    pages = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / "gold").is_dir()):
        kind = "big5" if folder.name.startswith("big") else folder.name.split("-")[0]
        for html in sorted((folder / "html").iterdir())[:limit]:
            gold = folder / "gold" / f"{html.stem}.txt"
            if html.suffix in (".htm", ".html") and gold.exists():
                pages.append(GoldPage(f"utomo-{kind}", f"{folder.name}/{html.stem}", None,
                                      html.read_bytes(), truth=_read_text(gold)))
    return pages


# Labels of the Google-Trends-2017 annotations, as written (a few with typos), read as
# what they mean; the gold is the "main" text.
_GT_LABELS = {"commen": "comment", "substitle": "subtitle", "title&quot;": "title",
              "\u00b4head": "head"}
_GT_LABEL_ATTR = re.compile(rb"""\s__label=(?:"[^"]*"|'[^']*')""")
_GT_BLOCK_TAGS = frozenset(("p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6",
                            "table", "tr", "td", "th", "blockquote", "pre", "section", "article",
                            "header", "footer", "figure", "figcaption", "dd", "dt", "dl"))


def _gt_label(el: Any) -> str | None:
    raw = el.get("__label")
    if raw is None:
        return None
    label = raw.strip().lower()
    return _GT_LABELS.get(label, label)


def _gt_main_text(root: Any) -> str:
    """The text under the outermost elements labelled ``main``, less what lies under an
    element with another label (a comment, caption, byline or date inside the article),
    block elements on lines of their own (``itertext`` alone would glue "end</p><p>Next")."""
    parts: list[str] = []

    def walk(el: Any, inside: bool) -> None:
        label = _gt_label(el)
        if label is not None and label != "main" and inside:
            return
        inside = inside or label == "main"
        tag = el.tag if isinstance(el.tag, str) else ""  # comments and processing instructions: no tag
        if tag in ("script", "style", "noscript"):
            return
        block = tag in _GT_BLOCK_TAGS
        if inside and block:
            parts.append("\n")
        if inside and el.text:
            parts.append(el.text)
        for child in el:
            walk(child, inside)
            if inside and child.tail:
                parts.append(child.tail)
        if inside and block:
            parts.append("\n")

    walk(root, False)
    return "\n".join(line.strip() for line in "".join(parts).splitlines() if line.strip())


def load_googletrends(root: Path, limit: int | None = None) -> list[GoldPage]:
    """Google-Trends-2017 (Leonhardt et al., BoilerNet, 2020): 180 English pages of 2017
    search-trend topics (news, entertainment, sport), annotated by hand in the browser with a
    ``__label`` attribute on the elements (main, title, author, date, comment, caption...).
    ``root`` holds ``raw_html/NNN.html``. The gold is the ``main`` text (a page with none
    has no gold and is left out); the labels are taken out of the page the extractors see
    (an extractor must not read the answer)."""
    import lxml.html

    pages = []
    for path in sorted((root / "raw_html").glob("*.html"))[:limit]:
        raw = path.read_bytes()
        tree = lxml.html.document_fromstring(raw)
        truth = _gt_main_text(tree)
        if truth:
            pages.append(GoldPage("googletrends", path.stem, None, _GT_LABEL_ATTR.sub(b"", raw),
                                  truth=truth))
    return pages


# A Fundus page counts only where its gold is what a reader of the page sees: at least this
# share of the gold's 4-token shingles in the page's visible text (a body the parser read
# from a script's JSON, or a page saved in another encoding, is not), and at least this many
# ``\w+`` tokens (a text of a few tokens, e.g. Japanese with no spaces, makes the shingle
# metric a coin toss). Both read the gold and the page only, never an extractor's output.
FUNDUS_MIN_VISIBLE = 0.8
FUNDUS_MIN_TOKENS = 50
_FUNDUS_DATA = Path("tests/resources/parser/test_data")


def _fundus_body(body: dict[str, Any]) -> str:
    """The text of Fundus's ``body`` attribute: the summary, then each section's headline
    and paragraphs, one per line."""
    parts = list(body.get("summary") or [])
    for section in body.get("sections") or []:
        parts += list(section.get("headline") or []) + list(section.get("paragraphs") or [])
    return "\n".join(p.strip() for p in parts if p and p.strip())


def visible_lines(body: bytes) -> list[str]:
    """The visible text lines of an HTML page (scripts, styles and templates dropped),
    whitespace folded, empty lines left out: what a reader of the page can see."""
    import lxml.html

    html = decode_html(body)[0]
    try:
        root = lxml.html.fromstring(html)
    except Exception:  # noqa: BLE001 - an unparsable page has no lines
        return []
    for el in root.xpath("//script|//style|//noscript|//template"):
        el.drop_tree()
    lines = (_WS.sub(" ", line).strip() for line in root.text_content().splitlines())
    return [line for line in lines if line]


def _stored_bytes(text: str) -> bytes:
    """A Fundus page (kept decoded, as UTF-8) in the encoding its own ``<meta charset>``
    declares, so a decoder that honours the declaration reads it as the publisher served it."""
    raw = text.encode("utf-8")
    declared = meta_charset(raw)
    if declared:
        try:
            return text.encode(declared, "xmlcharrefreplace")
        except LookupError:
            pass
    return raw


def _read_fundus(path: Path, read: Any) -> Any:
    try:
        return read(path)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not a Fundus test file ({e})") from None


def load_fundus(root: Path, limit: int | None = None) -> list[GoldPage]:
    """Fundus's parser test pages (``root``: a Fundus checkout, or its
    ``tests/resources/parser/test_data`` folder): per country folder, ``<Publisher>.json``
    holds the expected attributes per parser version (``V1``, ``V1_1``, ``V2``, in the
    order the versions were written) and ``<Publisher>_<date>.html.gz`` one page per
    version (the oldest page is the first version's); ``meta.info`` their URLs. Gold: the
    version's ``body``; pages whose gold fails ``FUNDUS_MIN_VISIBLE`` or
    ``FUNDUS_MIN_TOKENS`` are left out. A file that is not gzip or JSON: a one-line error."""
    data = root / _FUNDUS_DATA if (root / _FUNDUS_DATA).is_dir() else root
    pages: list[GoldPage] = []
    for country in sorted(p for p in data.iterdir() if p.is_dir()):
        meta_path = country / "meta.info"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
        for expected in sorted(country.glob("*.json")):
            versions = _read_fundus(expected, lambda p: json.loads(p.read_text(encoding="utf-8")))
            htmls = sorted(country.glob(f"{expected.stem}_*.html.gz"))
            if len(htmls) != len(versions):
                continue  # a page per version, or the pairing is not known
            for html, attrs in zip(htmls, versions.values()):
                truth = _fundus_body(attrs.get("body") or {})
                body = _stored_bytes(_read_fundus(html, lambda p: gzip.decompress(p.read_bytes()).decode("utf-8")))
                gold = shingles(truth)
                seen = shingles("\n".join(visible_lines(body)))
                shown = sum(min(n, seen.get(k, 0)) for k, n in gold.items()) / max(1, sum(gold.values()))
                if len(_TOKEN.findall(truth)) < FUNDUS_MIN_TOKENS or shown < FUNDUS_MIN_VISIBLE:
                    continue
                name = html.name.removesuffix(".html.gz")
                pages.append(GoldPage("fundus", f"{country.name}/{name}",
                                      (meta.get(html.name) or {}).get("url"), body, truth=truth))
    return pages[:limit] if limit else pages


# Every gold set's loader by the name the commands and ``afm bench --gold``'s folders use:
# a new set is one loader here (and its command-line option).
LOADERS = {"scrapinghub": load_scrapinghub, "wcxb": load_wcxb, "trafilatura": load_trafilatura_eval,
           "utomo": load_utomo, "googletrends": load_googletrends, "fundus": load_fundus}


def load_sets(limit: int | None = None, **paths: Path | None) -> list[GoldPage]:
    """Every page of the sets given by their ``LOADERS`` name (``wcxb=DIR``; a None path:
    that set is left out), in ``LOADERS``' order."""
    unknown = sorted(set(paths) - set(LOADERS))
    if unknown:
        raise UserError(f"unknown extraction gold set(s) {', '.join(unknown)}; known: {', '.join(LOADERS)}")
    pages: list[GoldPage] = []
    for name, loader in LOADERS.items():
        path = paths.get(name)
        if path is None:
            continue
        if not Path(path).is_dir():
            raise UserError(f"{path}: no such folder (an extraction gold set)")
        pages.extend(loader(Path(path), limit))
    return pages
