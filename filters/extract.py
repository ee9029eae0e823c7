"""Main-text extraction from crawled HTML: decode, extract, choose, trim.

Methods (``ExtractConfig.method``): ``blocks``, the block extractor (lexbor's DOM cut into
blocks, each kept or dropped by a small learned model: ``extraction/block_model.py``,
issue 57); ``selector``, the learned cascade over trafilatura, Resiliparse and
readability described next; ``trafilatura``, trafilatura alone (its defaults, no
comments); ``rules``, the earlier design described last.

The AFM report extracts text by combining two extractors (a reader mode and Boilerpipe).
With ``method="selector"`` extraction is the learned cascade of
``filters/extraction/``: trafilatura's balanced pass and Resiliparse run; when they agree
the balanced pass's text, less its leading and trailing lines Resiliparse lacks, is the
answer (the fast path, most pages), otherwise trafilatura's default mode
and readability run and the answer is a line vote: the default mode's lines plus those a
majority of the extractors hold (``extraction/vote.py``). Gold sets, by-set
held-out figures and what did not work: ``experiments/extraction-selector/README.md``.
``method="rules"`` keeps the earlier design, described below, measured on the
article-extraction benchmark in ``../shared/eval/extraction`` (181 real pages,
4-token-shingle F1; see ``bench_filters``):

* **Decoding** picks the charset from, in order, a byte-order mark, the HTTP
  ``Content-Type`` header, the page's ``<meta>`` declaration, strict UTF-8, and finally
  charset-normalizer's detection. A declared charset that fails to decode is ignored
  rather than trusted (mislabelled pages are common).
* **Two extractions, compared on every page.** The primary pass is trafilatura in
  precision mode without comments; the balanced pass (trafilatura's own readability /
  jusText fallbacks enabled) runs too, and wins when it finds at least
  ``fallback_ratio`` times as many words. The comparison is relative on purpose: a
  fixed word floor ("run the balanced pass only below 100 words") let a precision pass
  that kept just an intro or an author box of 110-350 words beat a balanced pass that
  found the 1,000-3,000-word article.
* **Teaser-line trimming** drops lines that introduce other pages ("SEE MORE: ...",
  "Related: ...", "Advertisement", "[VIDEO]"-tagged headlines, CMS shortcodes). Safe by
  construction: only a line of at most ``teaser_max_words`` words can go (a headline,
  not a paragraph: a layout-table row that trafilatura renders as one line starting with
  "Advertisement" holds the whole article), and if the candidates hold more than
  ``teaser_max_share`` of the text nothing is trimmed.

Measured (``afm bench extraction_cv``: 5 random 2-fold splits of the 181 pages; each
choice made on one half, F1 measured on the other, mean of the 10 held-out halves):
the precision pass, chosen over the balanced one per half, 0.9631 (the balanced pass
alone: 0.9598); precision pass 0.9641, + the length comparison 0.9688 (better on 5
held-out halves, worse on none), + teaser trimming 0.9702 (better on all 10). The
ratio is chosen per half as the largest that does as well as any on the training half
(the rule guards against a failure that is rare in any sample, so ties favour comparing,
least intrusively). The whole benchmark cannot tell ratios from 4 to 12 apart; the
default is 4 because the failure it guards against, seen on pages outside the benchmark,
has the balanced pass 3-10 times longer. On all 181 pages, where the defaults were
chosen, F1 is 0.9703 (P 0.965, R 0.976): an optimistic figure; quote the held-out one.
Trafilatura in its default mode: 0.9525. Speed (``afm bench extraction``, CPU time of one
process): about 21 pages/s against plain trafilatura's 26; the balanced pass runs on the
13% of pages whose text could make it win.
Also tried: favor_recall (0.952), fast/no-fallback (0.955), precision mode with fast=True
(0.946), readability alone (0.865), and resiliparse 2.0 as a second extractor (alone
0.917; the best per-page oracle with it only reached 0.974 and no page signal we tried
picked it reliably, so it is not a dependency).

Bad input never raises: binary bodies, undecodable bytes, oversized pages, non-HTML
content types, HTTP errors and pages with nothing to extract each become a
``Decision.drop`` with its own reason code.
"""

from __future__ import annotations

import datetime as dt
import html as html_lib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from afm.errors import UserError
from afm.filters.base import Decision
from afm.filters.extraction.block_model import MODEL_PATH as BLOCK_MODEL_PATH
from afm.filters.extraction.block_model import PageRule, extract_blocks, load_block_model
from afm.filters.extraction.candidates import Page, run_candidate
from afm.filters.extraction.decode import (
    decode_html,
    header_value,
    looks_binary,
    page_words,
)
from afm.filters.extraction.select import select_text
from afm.filters.extraction.selector import MODEL_PATH, load_selector
from afm.filters.language import load_lid_model
from afm.schema import make_document

_WORD = re.compile(r"\w+")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_OG_TITLE = re.compile(
    r"<meta[^>]+(?:property|name)\s*=\s*[\"']og:title[\"'][^>]*content\s*=\s*[\"']([^\"']*)[\"']"
    r"|<meta[^>]+content\s*=\s*[\"']([^\"']*)[\"'][^>]*(?:property|name)\s*=\s*[\"']og:title[\"']",
    re.I,
)
_TAG = re.compile(r"<[^>]+>")

# Lines that introduce other pages rather than belong to this one. Anchored at the line
# start (or, for headline tags, its end) so prose that merely mentions "related" stays.
_TEASER_LINE = re.compile(
    r"""^\W*(
        see\ more|see\ also|don'?t\ miss|
        related(\ articles|\ stories|\ posts|\ content|\ coverage)?\b|
        read\ (more|next|also)|more\ from\b|recommended(\ for\ you)?$|
        advertisement|sponsored|follow\ (us|him|her|them|me)\b|share\ (this|on)\b|
        tell\ us\ what\ you\ think|get\ access\ to|photo(s)?:|image(s)?:|credit:|updated\ at\b
    )""",
    re.I | re.X,
)
_SHORTCODE_LINE = re.compile(r"^\s*\[[a-z_]+\b[^\]]*\].*\[/[a-z_]+\]\s*$", re.I)
_TAGGED_HEADLINE = re.compile(
    r"\[(video|pics|insight|reaction|poll|photos?|gallery|latest|analysis|comment|live)\]\s*\|?\s*$",
    re.I,
)

METHODS = ("blocks", "selector", "trafilatura", "rules")
# Methods cheaper than the early language check's Resiliparse pass: the check is off.
CHEAP_METHODS = ("blocks",)
HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml", "text/plain")


@dataclass
class ExtractConfig:
    """Knobs of :class:`Extractor` (defaults are the measured best on the benchmark)."""

    max_bytes: int = 3_000_000  # larger bodies are dropped as "too_large" (time bound)
    # "blocks": lexbor's DOM cut into blocks, each kept by a learned model
    # (extraction/block_model.py); "selector": several extractors, the learned per-page
    # choice (extraction/selector.py); "trafilatura": trafilatura alone (its defaults,
    # ``include_comments`` and ``include_tables`` as set here); "rules": the earlier
    # trafilatura precision/balanced length rule (choose_text).
    method: str = "selector"
    selector_path: str | None = None  # None: the shipped model (data/extraction/)
    block_model_path: str | None = None  # None: the shipped block model (data/extraction/)
    min_words: int = 1  # fewer extracted words -> "empty_extraction"
    favor_precision: bool = True  # primary pass: trafilatura precision mode
    include_comments: bool = False  # user comments are rarely the page's content
    include_tables: bool = True
    fallback: bool = True  # also run the balanced pass, on every page, and compare
    fallback_ratio: float = 4.0  # balanced output wins with this many times the words
    trim_teasers: bool = True  # drop "SEE MORE:"/"Related:"-style teaser lines
    teaser_max_words: int = 30  # a longer line is content, never a teaser
    teaser_max_share: float = 0.5  # never trim when the candidates hold more of the text
    require_ok_status: bool = True  # drop non-2xx responses ("http_status")
    # Pages the language stage will drop need no careful extraction. When set (``afm
    # curate`` sets it to the language stage's ``keep`` when that stage runs; [] turns it
    # off), Resiliparse's text (~2 ms) is read first and a page whose first
    # ``early_language_chars`` characters, and then its whole text, the language model
    # gives one language outside the list with at least ``early_language_score`` is
    # dropped here ("language_not_kept", ``early``) before trafilatura runs. Chosen by source on the extraction gold sets
    # (docs/curation.md): at 0.8 none of the 2,500 pages the language stage keeps on the
    # cascade's text was dropped, 93% of those it drops were.
    early_language: list[str] | None = None
    early_language_score: float = 0.8
    early_language_chars: int = 1000
    early_language_model: str | None = None  # None: the language stage's default model


def follow_language_stage(cfg: ExtractConfig, stages: dict[str, Any]) -> None:
    """The curate stage's ``link`` hook: the early language check follows the ``language``
    stage of the run: on when that stage runs after extraction with a ``keep`` list (its
    languages, its model, at least its confidence), off otherwise. A value the user set (a
    list, or [] for off) is left alone. ``stages``: the run's stages by name, in order."""
    if cfg.early_language is not None:
        return
    if cfg.method in CHEAP_METHODS:  # extraction costs less than the check itself
        cfg.early_language = []
        return
    names = list(stages)
    language = stages.get("language")
    if (language is None or not language.active or not language.config.keep
            or names.index("language") < names.index("extract")):
        cfg.early_language = []
        return
    cfg.early_language = list(language.config.keep)
    cfg.early_language_model = language.config.model_path
    cfg.early_language_score = max(cfg.early_language_score, language.config.min_score)


# ---------------------------------------------------------------------------- extraction


def extract_title(html: str) -> str | None:
    """The page title: ``og:title`` when present (usually without the site suffix),
    else ``<title>``; HTML entities decoded, whitespace folded."""
    head = html[:100_000]
    match = _OG_TITLE.search(head)
    raw = (match.group(1) or match.group(2)) if match else None
    if not raw:
        match = _TITLE.search(head)
        raw = _TAG.sub("", match.group(1)) if match else None
    if not raw:
        return None
    title = " ".join(html_lib.unescape(raw).split())
    return title[:1000] or None


def trim_teaser_lines(text: str, max_words: int = 30, max_share: float = 0.5
                      ) -> tuple[str, int]:
    """Drop teaser/navigation lines; returns the text and how many lines went.

    Only lines of at most ``max_words`` words are candidates, and when the candidates
    hold more than ``max_share`` of the words nothing is dropped: a rule written for
    headlines can then never remove an article, whatever its layout."""
    lines = [line for line in text.split("\n") if line.strip()]
    drop = {i for i, line in enumerate(lines) if _is_teaser(line.strip())
            and _word_count(line) <= max_words}
    if not drop:  # most pages: no word counting needed
        return "\n".join(lines), 0
    total = sum(_word_count(line) for line in lines)
    if sum(_word_count(lines[i]) for i in drop) > max_share * total:
        return "\n".join(lines), 0
    return "\n".join(line for i, line in enumerate(lines) if i not in drop), len(drop)


def choose_text(primary: str, balanced: str | None, cfg: ExtractConfig
                ) -> tuple[str, dict[str, float]]:
    """The page's text from the two passes' outputs (``balanced`` None: not run), then
    trimmed; and the signals of how it was chosen. Pure, so the benchmark that tunes
    ``fallback_ratio`` and ``teaser_max_words`` runs exactly this rule."""
    text, used_fallback = primary, 0.0
    n_primary = _word_count(primary)
    n_balanced = n_primary if balanced is None else _word_count(balanced)
    if balanced is not None and n_balanced >= max(cfg.fallback_ratio * n_primary, 1):
        text, used_fallback = balanced, 1.0
    trimmed = 0
    if cfg.trim_teasers and text:
        text, trimmed = trim_teaser_lines(text, cfg.teaser_max_words, cfg.teaser_max_share)
    signals = {
        "primary_words": float(n_primary),
        "balanced_words": float(n_balanced),
        "fallback_used": used_fallback,
        "trimmed_lines": float(trimmed),
    }
    return text.strip(), signals


def _is_teaser(line: str) -> bool:
    return bool(_TEASER_LINE.match(line) or _SHORTCODE_LINE.match(line)
                or _TAGGED_HEADLINE.search(line))


def word_count(text: str | None) -> int:
    """Words of ``text`` (runs of word characters): the unit of ``text_words`` and of the
    curate report's opt-out cost."""
    return len(_WORD.findall(text or ""))


_word_count = word_count


class Extractor:
    """Crawled page (the WARC record shape) -> a ``web`` document with its main text.

    ``page = {"url", "status", "headers", "body": bytes, "fetched_at"}``. Returns
    ``Decision(keep=True, document=...)`` or a drop with one of the reasons
    ``http_status``, ``unsupported_content_type``, ``too_large``, ``binary_content``,
    ``decode_error``, ``empty_extraction``, ``extraction_error``.
    """

    name = "extract"

    def __init__(self, cfg: ExtractConfig | None = None) -> None:
        self.cfg = cfg or ExtractConfig()
        if self.cfg.method not in METHODS:
            raise UserError(f"extraction method {self.cfg.method!r}: use one of {', '.join(METHODS)}")
        if self.cfg.method != "blocks":
            import trafilatura  # noqa: F401 - fail at construction, not on the first page

        self._lid = None
        if self.cfg.early_language:
            self._lid = load_lid_model(self.cfg.early_language_model)
            self._early_keep = {lang.lower() for lang in self.cfg.early_language}
        self.selector = None
        self.block_model = None
        self._block_fallback: Callable[[str, str | None], str] | None = None
        if self.cfg.method == "selector":
            self.selector = load_selector(self.cfg.selector_path or str(MODEL_PATH))
        elif self.cfg.method == "blocks":
            self.block_model = load_block_model(self.cfg.block_model_path or str(BLOCK_MODEL_PATH))
            self._block_fallback = self._fallback_of(self.block_model.rule)

    def _trafilatura(self, html: str, url: str | None, precision: bool | None) -> str:
        import trafilatura

        text = trafilatura.extract(
            html,
            url=url,
            favor_precision=bool(precision),
            include_comments=self.cfg.include_comments,
            include_tables=self.cfg.include_tables,
            deduplicate=False,
        )
        return text or ""

    def _fallback_of(self, rule: PageRule) -> Callable[[str, str | None], str] | None:
        """The extractor of the pages ``rule`` hands on (too few kept words), the one it names
        as its choice scored it (``PageRule.fallback_to``), picked once here; None where the
        rule hands none on. Its library is imported now: a failure shows at construction,
        not as empty texts (a candidate call turns a failure into an empty text)."""
        if rule.fallback_words is None:
            return None
        if rule.fallback_to == "resiliparse":
            import resiliparse.extract.html2text  # noqa: F401

            return lambda html, url: run_candidate("resiliparse", Page(html, url))
        import trafilatura  # noqa: F401

        return lambda html, url: self._trafilatura(html, url, precision=None)

    def __getstate__(self) -> dict[str, Any]:  # picklable for Beam: reload on the worker
        return {"cfg": self.cfg}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cfg"])  # type: ignore[misc]

    def early_language(self, html: str, url: str | None
                       ) -> tuple[str | None, dict[str, str], Any]:
        """The language that drops the page before extraction (None: extract it), with
        Resiliparse's text and the parsed page for the cascade to reuse."""

        page = Page(html, url)
        texts = {"resiliparse": run_candidate("resiliparse", page)}
        text = texts["resiliparse"]
        lang = self._other_language(text[: self.cfg.early_language_chars])
        # The head is cheap and decides for most pages; a page it puts outside ``keep`` is
        # confirmed on the whole text (a page in two languages can open with the other).
        if lang is None or len(text) <= self.cfg.early_language_chars:
            return lang, texts, page
        return (lang if self._other_language(text[:20_000]) == lang else None), texts, page

    def _other_language(self, text: str) -> str | None:
        """The language of ``text`` when it is outside the kept ones with the required
        confidence, else None."""
        line = " ".join(text.split())
        if not line:
            return None
        labels, probs = self._lid.predict(line, k=1)  # type: ignore[union-attr]
        lang = labels[0].removeprefix("__label__")
        keep = lang not in self._early_keep and float(probs[0]) >= self.cfg.early_language_score
        return lang if keep else None

    def extract_text(self, html: str, url: str | None = None,
                     texts: dict[str, str] | None = None, page: Any = None,
                     ) -> tuple[str, dict[str, float]]:
        """The main text of a decoded page and the signals of how it was chosen
        (``texts``, ``page``: candidates already run on it, see ``select_text``)."""
        if self.block_model is not None:
            fallback = self._block_fallback
            text, signals = extract_blocks(self.block_model, html,
                                           None if fallback is None else lambda h: fallback(h, url))
            return text.strip(), signals
        if self.cfg.method == "trafilatura":
            return self._trafilatura(html, url, precision=None).strip(), {}
        if self.selector is not None:
            text, signals = select_text(self.selector, html, url, texts, page)
            trimmed = 0
            if self.cfg.trim_teasers and text:
                text, trimmed = trim_teaser_lines(text, self.cfg.teaser_max_words,
                                                  self.cfg.teaser_max_share)
            signals["trimmed_lines"] = float(trimmed)
            return text.strip(), signals
        return self._extract_by_rules(html, url)

    def _extract_by_rules(self, html: str, url: str | None) -> tuple[str, dict[str, float]]:
        cfg = self.cfg
        primary = self._trafilatura(html, url, precision=cfg.favor_precision)
        balanced = None
        if cfg.fallback and cfg.favor_precision:
            # The balanced pass can only win if the page holds fallback_ratio times the
            # primary's words: when it does not, its outcome is known without running it
            # (the balanced output is a part of the page's text). 13% of the benchmark's
            # pages need the second pass, so extraction keeps one pass's speed.
            needed = max(cfg.fallback_ratio * _word_count(primary), 1)
            if page_words(html) >= needed:
                balanced = self._trafilatura(html, url, precision=False)
        return choose_text(primary, balanced, cfg)

    def __call__(self, page: dict[str, Any]) -> Decision:
        cfg = self.cfg
        url = page.get("url") or None
        status = page.get("status")
        headers = page.get("headers") or {}
        body = page.get("body")
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        if body is None:
            body = b""
        if not isinstance(body, (bytes, bytearray, memoryview)):
            return Decision.drop("bad_record", field="body", type=type(body).__name__)
        body = bytes(body)
        signals: dict[str, float] = {"html_bytes": float(len(body))}
        if cfg.require_ok_status and status is not None:
            try:
                code = int(status)
            except (TypeError, ValueError):
                code = 0
            if not 200 <= code < 300:
                return Decision.drop("http_status", signals, status=status, url=url)
        ctype = header_value(headers, "content-type").split(";")[0].strip().lower()
        if ctype and not ctype.startswith(HTML_TYPES):
            return Decision.drop("unsupported_content_type", signals, content_type=ctype, url=url)
        if len(body) > cfg.max_bytes:
            return Decision.drop("too_large", signals, limit=cfg.max_bytes, url=url)
        if not body.strip():
            return Decision.drop("empty_extraction", signals, why="empty body", url=url)
        if looks_binary(body):
            return Decision.drop("binary_content", signals, url=url)
        try:
            html, codec, source = decode_html(body, headers)
        except (UnicodeError, LookupError) as exc:
            return Decision.drop("decode_error", signals, error=str(exc)[:200], url=url)
        try:
            texts, parsed = None, None
            if self._lid is not None:
                lang, texts, parsed = self.early_language(html, url)
                if lang is not None:
                    signals["early_language"] = 1.0
                    return Decision.drop("language_not_kept", signals, language=lang,
                                         early=True, url=url)
            text, ext_signals = self.extract_text(html, url, texts, parsed)
        except Exception as exc:  # noqa: BLE001 - recorded as a reject, never a crash
            # lxml/trafilatura failures on pathological markup (e.g. nesting depth).
            return Decision.drop(
                "extraction_error", signals, error=f"{type(exc).__name__}: {str(exc)[:200]}", url=url
            )
        signals.update(ext_signals)
        n_words = _word_count(text)
        signals["text_chars"] = float(len(text))
        signals["text_words"] = float(n_words)
        if n_words < max(cfg.min_words, 1):
            return Decision.drop("empty_extraction", signals, charset=codec, url=url)
        fetched_at = page.get("fetched_at")
        if fetched_at is not None and not isinstance(fetched_at, dt.datetime):
            fetched_at = None
        document = make_document(
            text, url=url, title=extract_title(html), fetched_at=fetched_at, source="web"
        )
        return Decision(
            keep=True,
            signals=signals,
            document=document,
            details={"charset": codec, "charset_source": source},
        )


def extract_html(
    html: str | bytes, url: str | None = None, cfg: ExtractConfig | None = None
) -> str:
    """Convenience: the main text of one HTML page ("" when nothing is extracted)."""
    body = html.encode("utf-8") if isinstance(html, str) else html
    decision = Extractor(cfg)({"url": url, "status": 200, "headers": {}, "body": body})
    return decision.document["text"] if decision.keep and decision.document else ""
