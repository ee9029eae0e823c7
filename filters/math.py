"""Math sources (AFM report §3.1.4): the math web-page filter and Math Q&A extraction.

The report filters math web pages with four parts, all here and all configurable:

* a **math-tag filter**: 40 strings that identify math templates (MathJax, KaTeX, MathML,
  LaTeX renderers), shipped in ``data/math/math_tags.txt``;
* a **math-symbol filter**: 350 Unicode and LaTeX symbols, shipped with their source in
  ``data/math/math_symbols.txt``;
* a **math quality classifier**: a fastText model trained with the project's shared
  classifier machinery (:mod:`afm.filters.classifier`, ``afm classifier train``);
* a **domain filter**: pages from a user-supplied list of (human-labelled) domains.

For ordinary web documents :class:`MathFilter` only reports its signals and keeps the
document; with ``require_math=True`` (what the ``--source math`` pipeline sets) a page
must carry math evidence (a labelled domain, a tag, or enough symbols) and, when a model is
configured, pass the math quality classifier.

:func:`extract_math_qa` pulls (question, answer) pairs out of Q&A-style pages (schema.org
``QAPage`` microdata, StackExchange markup, generic ``question``/``answer`` blocks), keeping
formulas as LaTeX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from afm.filters.base import Decision
from afm.filters.classifier import FastTextClassifier
from afm.schema import Document

DATA_DIR = Path(__file__).parent / "data" / "math"
TAGS_FILE = DATA_DIR / "math_tags.txt"
SYMBOLS_FILE = DATA_DIR / "math_symbols.txt"
# A small math-quality model trained by ``afm classifier train`` on the data shipped beside
# it (see data/math/README.md); optional, off by default (it only catches template spam).
MATH_QUALITY_MODEL = DATA_DIR / "math_quality.ftz"
# Most math templates (MathJax/KaTeX script and CSS links, MathML) live in the HTML and are
# gone after text extraction. The extract stage may store the page's HTML tag count under
# this signal key (``doc["signals"][HTML_TAG_SIGNAL] = len(tag_hits(html))``); the math
# filter then counts the larger of the HTML and text hits.
HTML_TAG_SIGNAL = "math.html_tag_hits"


@dataclass
class MathConfig:
    """Math filter parameters (see the module docstring)."""

    require_math: bool = False  # drop pages without math evidence (the math source sets it)
    tags_file: str = str(TAGS_FILE)
    symbols_file: str = str(SYMBOLS_FILE)
    min_tag_hits: int = 1  # distinct math-template strings needed
    min_symbol_hits: int = 5  # symbol occurrences needed ...
    min_distinct_symbols: int = 2  # ... of at least this many different symbols
    domains: list[str] = field(default_factory=list)  # human-labelled math domains
    domains_file: str | None = None  # one domain per line, '#' comments
    quality_model_path: str | None = None  # fastText model, e.g. str(MATH_QUALITY_MODEL)
    quality_threshold: float = 0.5


# --------------------------------------------------------------------------- data files


def _data_lines(path: str | Path) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"math filter data file not found: {p}")
    return [
        line.rstrip("\n")
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]


@lru_cache(maxsize=8)
def load_tags(path: str = str(TAGS_FILE)) -> tuple[str, ...]:
    """The math-template strings, lowercased (matching is case-insensitive)."""
    return tuple(dict.fromkeys(line.strip().lower() for line in _data_lines(path)))


@lru_cache(maxsize=8)
def load_symbols(path: str = str(SYMBOLS_FILE)) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(LaTeX commands, Unicode characters) from the symbol file (SYMBOL<TAB>KIND<TAB>SOURCE)."""
    latex: list[str] = []
    uni: list[str] = []
    for n, line in enumerate(_data_lines(path), 1):
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in ("latex", "unicode"):
            raise ValueError(f"{path}: entry {n} is not SYMBOL<TAB>latex|unicode<TAB>SOURCE: {line!r}")
        (latex if parts[1] == "latex" else uni).append(parts[0])
    return tuple(latex), tuple(uni)


@lru_cache(maxsize=8)
def _symbol_regex(path: str) -> re.Pattern[str]:
    latex, uni = load_symbols(path)
    names = sorted((c.lstrip("\\") for c in latex), key=len, reverse=True)
    latex_part = r"\\(?:" + "|".join(re.escape(n) for n in names) + r")(?![A-Za-z])"
    uni_part = "[" + "".join(re.escape(c) for c in uni) + "]"
    return re.compile(f"{latex_part}|{uni_part}")


def tag_hits(text: str, tags: tuple[str, ...] | None = None) -> list[str]:
    """The math-template strings present in ``text`` (HTML or extracted text)."""
    low = text.lower()
    return [t for t in (tags if tags is not None else load_tags()) if t in low]


def symbol_hits(text: str, symbols_file: str = str(SYMBOLS_FILE)) -> list[str]:
    """Every occurrence of a listed math symbol in ``text``, in order."""
    return _symbol_regex(symbols_file).findall(text)


def load_domains(domains: list[str], domains_file: str | None) -> frozenset[str]:
    out = {d.strip().lower().lstrip(".") for d in domains if d.strip()}
    if domains_file:
        out |= {d.strip().lower().lstrip(".") for d in _data_lines(domains_file)}
    return frozenset(out)


def domain_match(url: str | None, domains: frozenset[str]) -> bool:
    """True when the URL's host is one of ``domains`` or a subdomain of one."""
    if not url or not domains:
        return False
    host = (urlsplit(url).hostname or "").lower()
    return any(host == d or host.endswith("." + d) for d in domains)


# --------------------------------------------------------------------------- the filter


class MathFilter:
    """Math tag / symbol / quality-model / domain filter (reports signals; drops only
    when ``require_math``)."""

    name = "math"

    def __init__(self, cfg: MathConfig | None = None) -> None:
        self.cfg = cfg or MathConfig()
        self.tags = load_tags(self.cfg.tags_file)
        load_symbols(self.cfg.symbols_file)  # validate early
        self.domains = load_domains(self.cfg.domains, self.cfg.domains_file)
        self._model: Any = None
        if self.cfg.quality_model_path:
            self._model = FastTextClassifier(self.cfg.quality_model_path)

    def signals(self, doc: Document) -> dict[str, float]:
        text = doc.get("text") or ""
        tags = tag_hits(text, self.tags)
        html_hits = float((doc.get("signals") or {}).get(HTML_TAG_SIGNAL) or 0.0)
        syms = symbol_hits(text, self.cfg.symbols_file)
        out = {
            "math_tag_hits": max(float(len(tags)), html_hits),
            "math_symbol_hits": float(len(syms)),
            "math_symbol_distinct": float(len(set(syms))),
            "math_symbol_per_kchar": 1000.0 * len(syms) / max(len(text), 1),
            "math_domain": float(domain_match(doc.get("url"), self.domains)),
        }
        cfg = self.cfg
        is_math = (
            out["math_domain"] > 0
            or out["math_tag_hits"] >= cfg.min_tag_hits
            or (out["math_symbol_hits"] >= cfg.min_symbol_hits
                and out["math_symbol_distinct"] >= cfg.min_distinct_symbols)
        )
        out["math_is_math"] = float(is_math)
        if self._model is not None:
            out["math_quality"] = float(self._model.score([text])[0])
        return out

    def __call__(self, doc: Document) -> Decision:
        sig = self.signals(doc)
        if not self.cfg.require_math:
            return Decision(keep=True, signals=sig)
        if not sig["math_is_math"]:
            return Decision.drop("math_no_evidence", sig)
        if "math_quality" in sig and sig["math_quality"] < self.cfg.quality_threshold:
            return Decision.drop("math_quality", sig, threshold=self.cfg.quality_threshold)
        return Decision(keep=True, signals=sig)


# --------------------------------------------------------------------------- Math Q&A

_BLOCK_TAGS = {
    "p", "div", "br", "li", "ul", "ol", "pre", "blockquote", "table", "tr",
    "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "hr", "dd", "dt",
}
_DROP_CLASSES = ("mathjax_preview", "mathjax", "mathjax_display", "mjx-chtml", "katex-html",
                 "mathjax_svg", "mathjax_chtml")


def _classes(el: Any) -> set[str]:
    return set((el.get("class") or "").lower().split())


def _normalise_math(root: Any) -> None:
    """Rewrite rendered formulas back into LaTeX in place: MathJax ``script`` sources,
    KaTeX/MathML TeX annotations and ``alttext``; rendered copies removed."""
    for el in list(root.iter("script")):
        typ = (el.get("type") or "").lower()
        if typ.startswith("math/tex"):
            delim = "$$" if "mode=display" in typ else "$"
            span = el.makeelement("span", {})
            span.text = f"{delim}{(el.text or '').strip()}{delim}"
            span.tail = el.tail
            el.getparent().replace(el, span)
    for el in list(root.iter()):
        if not isinstance(el.tag, str):
            continue
        if el.tag.lower().endswith("math"):
            tex = None
            for ann in el.iter():
                if isinstance(ann.tag, str) and ann.tag.lower().endswith("annotation") and (
                    "tex" in (ann.get("encoding") or "").lower()
                ):
                    tex = (ann.text or "").strip()
                    break
            tex = tex or el.get("alttext")
            if tex is not None and el.getparent() is not None:
                span = el.makeelement("span", {})
                span.text = f"${tex.strip()}$"
                span.tail = el.tail
                el.getparent().replace(el, span)
    for el in list(root.iter()):
        if isinstance(el.tag, str) and (_classes(el) & set(_DROP_CLASSES)) and el.getparent() is not None:
            if el.tag.lower() == "span" and (el.text or "").startswith("$"):
                continue
            el.drop_tree()
    for el in list(root.iter("style", "noscript")):
        el.drop_tree()
    for el in list(root.iter("script")):
        el.drop_tree()


def _text(el: Any) -> str:
    """Visible text: newlines only at block boundaries (source newlines are spaces, as
    in a browser, except inside ``pre``), spaces collapsed."""
    parts: list[str] = []
    brk = "\x00"

    def flow(s: str, pre: bool) -> str:
        return s.replace("\n", brk) if pre else s.replace("\n", " ")

    def walk(node: Any, pre: bool) -> None:
        tag = node.tag.lower() if isinstance(node.tag, str) else ""
        pre = pre or tag == "pre"
        if tag in _BLOCK_TAGS:
            parts.append(brk)
        if node.text and tag:
            parts.append(flow(node.text, pre))
        for child in node:
            walk(child, pre)
            if child.tail:
                parts.append(flow(child.tail, pre))
        if tag in _BLOCK_TAGS:
            parts.append(brk)

    walk(el, False)
    text = "".join(parts)
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split(brk)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _itemprop(el: Any, prop: str) -> list[Any]:
    return [e for e in el.iter() if isinstance(e.tag, str) and prop in (e.get("itemprop") or "").split()]


def _first_text(el: Any, *xpaths: str) -> str:
    for xp in xpaths:
        found = el.xpath(xp)
        if found:
            txt = _text(found[0])
            if txt:
                return txt
    return ""


def _votes(el: Any) -> int:
    for e in _itemprop(el, "upvoteCount"):
        raw = e.get("content") or e.text_content()
        try:
            return int(str(raw).strip())
        except ValueError:
            continue
    raw = el.get("data-score")
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def _microdata_pairs(root: Any) -> list[tuple[str, list[tuple[bool, int, str]]]]:
    out = []
    for q in root.xpath('//*[contains(@itemtype, "schema.org/Question")]'):
        answers_el = _itemprop(q, "acceptedAnswer") + _itemprop(q, "suggestedAnswer")
        answer_ids = {id(a) for a in answers_el}

        def inside_answer(e: Any, answer_ids: set[int] = answer_ids) -> bool:
            p = e.getparent()
            while p is not None:
                if id(p) in answer_ids:
                    return True
                p = p.getparent()
            return False

        name = next((_text(e) for e in _itemprop(q, "name") if not inside_answer(e)), "")
        body = next((_text(e) for e in _itemprop(q, "text") if not inside_answer(e)), "")
        question = "\n\n".join(x for x in (name, body) if x)
        answers = []
        for a in answers_el:
            texts = _itemprop(a, "text")
            txt = _text(texts[0]) if texts else _text(a)
            accepted = "acceptedAnswer" in (a.get("itemprop") or "")
            answers.append((accepted, _votes(a), txt))
        out.append((question, answers))
    return out


def _stackexchange_pairs(root: Any) -> list[tuple[str, list[tuple[bool, int, str]]]]:
    qs = root.xpath('//*[@id="question"]')
    if not qs:
        return []
    title = _first_text(root, '//*[@id="question-header"]//h1', '//h1[contains(@class,"question")]')
    body = _first_text(qs[0], './/*[contains(@class,"s-prose")]', './/*[contains(@class,"post-text")]')
    answers = []
    for a in root.xpath('//*[contains(concat(" ", normalize-space(@class), " "), " answer ")]'):
        txt = _first_text(a, './/*[contains(@class,"s-prose")]', './/*[contains(@class,"post-text")]')
        accepted = "accepted-answer" in _classes(a)
        answers.append((accepted, _votes(a), txt))
    return [("\n\n".join(x for x in (title, body) if x), answers)]


def _generic_pairs(root: Any) -> list[tuple[str, list[tuple[bool, int, str]]]]:
    def has_class(word: str) -> str:
        return f'//*[contains(concat(" ", normalize-space(@class), " "), " {word} ")]'

    qs = root.xpath(has_class("question"))
    ans = root.xpath(has_class("answer"))
    if not qs:
        return []
    return [(_text(qs[0]), [(False, 0, _text(a)) for a in ans])]


def extract_math_qa(html: str, max_answers: int = 1, min_chars: int = 10) -> list[dict[str, str]]:
    """(question, answer) pairs from a Q&A page, formulas kept as ``$LaTeX$``.

    Answers are ranked accepted-first, then by votes; up to ``max_answers`` per question.
    Pairs whose question or answer is shorter than ``min_chars`` are skipped. Returns an
    empty list for pages that are not Q&A pages or cannot be parsed.
    """
    import lxml.html

    if not html or not html.strip():
        return []
    try:
        root = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return []
    _normalise_math(root)
    found = _microdata_pairs(root) or _stackexchange_pairs(root) or _generic_pairs(root)
    out: list[dict[str, str]] = []
    for question, answers in found:
        if len(question) < min_chars:
            continue
        ranked = sorted(answers, key=lambda a: (not a[0], -a[1]))
        for _accepted, _votes_n, answer in ranked[:max_answers]:
            if len(answer) >= min_chars:
                out.append({"question": question, "answer": answer})
    return out
