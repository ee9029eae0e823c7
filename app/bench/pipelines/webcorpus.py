"""A web-sized benchmark corpus made from the 181 real article pages we have.

A throughput figure from 226 pages measures start-up; one from 181 pages copied 60 times
measures a dedup stage that drops nearly everything and stages after it that see nothing.
So each generated page keeps a real page's HTML (its layout, navigation, scripts and
boilerplate: what extraction pays for) and gets a new article body: its paragraphs
(``<p>`` elements with real text) are replaced by paragraphs drawn, seeded, from the
whole set. Most pages are then new texts; a share are exact copies of an earlier page
under another URL (exact dedup's share) and a share near copies (one paragraph changed:
MinHash LSH's share), placed in other WARC files than their originals, so only a global
dedup finds them. Every page is HTML the real crawl produced, only recombined.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# <p ...>inner</p>, inner without nested paragraphs (real pages' article paragraphs)
_PARAGRAPH = re.compile(rb"(<p\b[^>]*>)(.*?)(</p\s*>)", re.I | re.S)
_TAG = re.compile(rb"<[^>]+>")
MIN_PARAGRAPH_CHARS = 80
EXACT_SHARE = 0.10
NEAR_SHARE = 0.10


@dataclass(frozen=True)
class Template:
    """One real page cut at its article paragraphs: ``parts[0] + p1 + parts[1] + ...``;
    ``paragraphs``: the page's own article paragraphs (what tells its language)."""

    url: str
    parts: tuple[bytes, ...]
    paragraphs: tuple[str, ...] = ()

    @property
    def slots(self) -> int:
        return len(self.parts) - 1


def _text(inner: bytes) -> str:
    return html.unescape(_TAG.sub(b" ", inner).decode("utf-8", "replace")).strip()


def load_templates(extraction_dir: Path) -> tuple[list[Template], list[str]]:
    """The pages cut at their paragraphs, and every paragraph's text (the pool)."""
    truth = json.loads((extraction_dir / "ground-truth.json").read_text(encoding="utf-8"))
    templates, pool = [], []
    for path in sorted((extraction_dir / "html").glob("*.html.gz")):
        key = path.name.split(".")[0]
        body = gzip.decompress(path.read_bytes())
        parts: list[bytes] = []
        own: list[str] = []
        last = 0
        for m in _PARAGRAPH.finditer(body):
            text = _text(m.group(2))
            if len(text) < MIN_PARAGRAPH_CHARS:
                continue
            pool.append(text)
            own.append(text)
            parts.append(body[last:m.end(1)])
            last = m.start(3)
        parts.append(body[last:])
        if len(parts) >= 3:  # at least two article paragraphs to replace
            templates.append(Template(truth.get(key, {}).get("url") or f"http://bench.test/{key}",
                                      tuple(parts), tuple(own)))
    return templates, pool


def _fill(t: Template, paragraphs: list[str]) -> bytes:
    out = [t.parts[0]]
    for part, text in zip(t.parts[1:], paragraphs, strict=True):
        out += [html.escape(text).encode("utf-8"), part]
    return b"".join(out)


def generate_pages(extraction_dir: Path, n: int, seed: int = 0,
                   english_share: float | None = None) -> list[tuple[str, bytes]]:
    """``n`` pages (url, HTML bytes): new texts, exact copies and near copies (see the
    module docstring), deterministic for a seed. ``english_share``: pages in one language
    each, as on the web (a template gets paragraphs of its own language), English
    templates chosen for that share of the new texts; None: paragraphs drawn from every
    page whatever its language (the curate benchmark's corpus)."""
    templates, pool = load_templates(extraction_dir)
    rng = random.Random(seed)
    if english_share is None:
        return _recombined(n, rng, lambda i: templates[i % len(templates)], lambda t: pool)
    if not 0.0 <= english_share <= 1.0:
        raise ValueError(f"english_share must be in [0, 1], got {english_share}")
    languages = template_languages(templates)
    pools: dict[str, list[str]] = {}
    for t, lang in zip(templates, languages, strict=True):
        pools.setdefault(lang, []).extend(t.paragraphs)
    language_of = {t.url: lang for t, lang in zip(templates, languages, strict=True)}
    english = [t for t in templates if language_of[t.url] == "en"]
    other = [t for t in templates if language_of[t.url] != "en"]

    def one_language_template(_i: int) -> Template:
        wants_english = rng.random() < english_share
        group = english if (wants_english and english) or not other else other
        return group[rng.randrange(len(group))]

    return _recombined(n, rng, one_language_template, lambda t: pools[language_of[t.url]])


def _recombined(n: int, rng: random.Random, template_for: Callable[[int], Template],
                pool_for: Callable[[Template], list[str]]) -> list[tuple[str, bytes]]:
    """The pages: page ``i`` is an exact copy of an earlier page, a near copy (one
    paragraph of an earlier new text changed) or a new text, ``template_for(i)`` filled
    with paragraphs drawn from ``pool_for(template)``."""
    pages: list[tuple[str, bytes]] = []
    bodies: list[tuple[Template, list[str]]] = []
    for i in range(n):
        roll = rng.random()
        if pages and roll < EXACT_SHARE:
            _, body = pages[rng.randrange(len(pages))]
            pages.append((f"http://copy{i % 97}.bench.test/page/{i}", body))
            continue
        if bodies and roll < EXACT_SHARE + NEAR_SHARE:
            t, paragraphs = bodies[rng.randrange(len(bodies))]
            paragraphs = list(paragraphs)
            paragraphs[rng.randrange(len(paragraphs))] = rng.choice(pool_for(t))  # one paragraph changed
        else:
            t = template_for(i)
            paragraphs = [rng.choice(pool_for(t)) for _ in range(t.slots)]
            bodies.append((t, paragraphs))
        host = hashlib.sha1(t.url.encode()).hexdigest()[:6]
        pages.append((f"http://site{host}.bench.test/{i}", _fill(t, paragraphs)))
    return pages


def template_languages(templates: list[Template]) -> list[str]:
    """Each template's language: the language stage's model on its own paragraphs."""
    from afm.filters.language import LanguageFilter

    return [lang for lang, _ in LanguageFilter().predict([" ".join(t.paragraphs) for t in templates])]


def corpus_key(n: int, seed: int, files: int, english_share: float | None = None) -> str:
    one_language = "" if english_share is None else f"-en{english_share:.2f}"
    return f"web-{n}-seed{seed}-files{files}{one_language}"


__all__ = ["EXACT_SHARE", "NEAR_SHARE", "Template", "corpus_key", "generate_pages", "load_templates",
           "template_languages"]
