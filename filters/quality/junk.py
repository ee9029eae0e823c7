"""Junk of each kind that reaches the quality stage on the real web, made from real text.

Extraction removes most of a page's chrome, but not all of it, and many pages have no
main text worth keeping. A quality stage is judged on how much of this it drops, so the
project needs junk of each kind, and made so that it cannot be told from good text by its
**subject**: every junk text here is built from one real good text (its words, sentences,
headings) and real page boilerplate, so a junk set has the topics of the good texts it was
made from, and a model trained to separate the two cannot learn "politics is junk".

Kinds (:data:`KINDS`), each one function ``make_<kind>(material, rng)``:

* ``boilerplate``: a real page's visible lines that are not its main text (menus,
  teasers, footers), as a failed extraction leaves them; lines holding main text are
  left out;
* ``navigation``: menus and breadcrumbs: short real boilerplate lines, one item a line or
  joined by separators;
* ``link_list``: lists of headlines made from the text's sentences, with dates and "read
  more" lines (related-article and archive pages);
* ``listing``: a product grid: names made from the text's words, prices, ratings, buttons;
* ``keyword_spam``: SEO pages: the text's keywords stuffed into sales phrases and tag lists;
* ``templated``: machine-made doorway pages: one paragraph template filled with the text's
  keywords and place names again and again;
* ``word_salad``: the text's own words in random order, cut into sentence-shaped runs;
* ``machine_made``: a word-bigram chain over the text and others of its topic: locally
  fluent, globally meaningless, as cheap generated pages are;
* ``repetition``: a generation loop: a few of the text's sentences repeated;
* ``cookie_legal``: cookie banners, consent and legal notices: real lines of that kind from
  page boilerplate;
* ``truncated``: a paywall teaser: the start of the text cut mid-sentence, then the
  subscription prompt.

``afm quality junk`` writes a set of each kind (JSONL) from the gold pages given; the
sets the quality default is tested on are made from pages it never saw.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from afm.filters.quality.texts import KindText

KINDS = ("boilerplate", "navigation", "link_list", "listing", "keyword_spam", "templated",
         "word_salad", "machine_made", "repetition", "cookie_legal", "truncated")

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“])")
_WORD = re.compile(r"[^\W\d_][\w'’-]*[^\W_]|[^\W\d_]")
_TOKEN = re.compile(r"\S+")
_LEGAL = re.compile(r"cookie|privacy|consent|terms (?:of|and)|rights reserved|copyright|gdpr|personal data|"
                    r"disclaimer|all rights|legal notice|imprint|impressum|datenschutz", re.I)
STOP = frozenset(
    "a about above after again against all am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each few for from further had has have "
    "having he her here hers herself him himself his how i if in into is it its itself just me more most "
    "my myself no nor not now of off on once only or other our ours out over own same she should so some "
    "such than that the their theirs them then there these they this those through to too under until up "
    "very was we were what when where which while who whom why will with would you your yours also said "
    "says one two new like get make many much may might must us year years among since while within without "
    "across around another could every still even back well first last next being through upon onto "
    "however although though whether either neither it's don't that's there's time people way".split())

# Phrases written for these generators (shop, SEO and paywall chrome of the common kinds).
_BUTTONS = ("Add to cart", "Add to basket", "Buy now", "Quick view", "Compare", "Add to wishlist",
            "Select options", "View details", "Notify me", "Sold out", "In stock", "Free shipping",
            "Only 3 left", "Sale!", "New arrival", "Best seller")
_SPAM = ("Best {a} {b} online", "Buy cheap {a} today", "{a} {b} near me", "top {a} deals {y}",
         "{a} for sale", "discount {a} {b} free shipping", "cheap {a} {b} {c}", "{a} {b} reviews {y}",
         "where to buy {a}", "{a} price list {y}", "official {a} {b} store", "{a} coupon code",
         "{a} {b} best price guaranteed", "order {a} online now", "{a} {c} wholesale",
         "{a} {b} {c} sale", "get {a} fast", "#1 {a} {b} site", "{a} {b} 100% original")
_TEMPLATES = (
    "Looking for the best {kw} in {place}? Our {kw} team in {place} offers fast, friendly and "
    "affordable {kw2} for homes and businesses across {place}. Call today for a free {kw} quote in "
    "{place} and find out why {place} trusts us for {kw2}.",
    "{place} {kw} services: we are the leading {kw} provider in {place}. Whether you need {kw2} or "
    "{kw} help, our {place} experts are available 24/7. Contact the number one {kw} company in "
    "{place} now.",
    "Top 10 {kw} in {place} ({year}). Find and compare {kw2} in {place}: prices, reviews and "
    "opening hours of every {kw} near {place}. Book your {kw} in {place} online in minutes.",
)
_PAYWALL = ("Subscribe to continue reading.", "This article is for subscribers only.",
            "Already a subscriber? Sign in.", "Read the full story with a digital subscription.",
            "Continue reading", "Register for free to read the rest of this article.",
            "You have reached your limit of free articles.")
_READ_MORE = ("Read more", "Continue reading", "Full story", "More", "Read the article", "Learn more")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_SEPARATORS = (" | ", " · ", " › ", " / ", " » ", "  ")


@dataclass
class Material:
    """What a junk text is made of: one good text, others of its topic (for the
    bigram chain), and real page boilerplate (from the page of the text when it had one,
    else from other pages of its source)."""

    text: KindText
    same_topic: Sequence[KindText] = ()
    boilerplate: str = ""  # the page's own boilerplate lines ('' when it has none)
    boilerplate_pool: Sequence[str] = ()  # real boilerplate lines of pages of the same source
    # The pool's menu items (1-4 words) and legal / cookie lines (None: found on first use).
    nav_items: Sequence[str] | None = None
    legal_lines: Sequence[str] | None = None
    _sentences: list[str] | None = field(default=None, repr=False)
    _words: list[str] | None = field(default=None, repr=False)

    @property
    def sentences(self) -> list[str]:
        if self._sentences is None:
            flat = " ".join(self.text.text.split())
            self._sentences = [s for s in _SENT.split(flat) if len(s.split()) >= 4]
        return self._sentences

    @property
    def words(self) -> list[str]:
        if self._words is None:
            self._words = _WORD.findall(self.text.text)
        return self._words

    def keywords(self, n: int = 12) -> list[str]:
        """The text's most frequent content words (lower case)."""
        counts: dict[str, int] = {}
        for w in self.words:
            low = w.lower()
            if len(low) > 3 and low not in STOP:
                counts[low] = counts.get(low, 0) + 1
        ranked = sorted(counts, key=lambda k: (-counts[k], k))
        return ranked[:n] or ["product"]

    def capitalised(self) -> list[str]:
        """Capitalised words not at a sentence start (names and places, roughly)."""
        out = []
        tokens = self.text.text.split()
        for prev, tok in zip(tokens, tokens[1:]):
            word = tok.strip(".,;:!?\"'()[]“”’")
            if word[:1].isupper() and word[1:].islower() and len(word) > 3 and not prev.endswith((".", "!", "?")):
                out.append(word)
        return list(dict.fromkeys(out)) or ["Springfield", "Riverside", "Greenville"]


def _headline(sentence: str, rng: random.Random) -> str:
    words = sentence.rstrip(".!?").split()
    n = min(len(words), rng.randint(5, 10))
    return " ".join(w.capitalize() if w.islower() and len(w) > 3 else w for w in words[:n])


def _date(rng: random.Random) -> str:
    return f"{rng.choice(_MONTHS)} {rng.randint(1, 28)}, {rng.randint(2009, 2025)}"


def _fill(lines: list[str], make: Callable[[], list[str]], min_words: int, cap: int = 400) -> list[str]:
    while sum(len(x.split()) for x in lines) < min_words and len(lines) < cap:
        lines.extend(make())
    return lines


def _content_shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    toks = text.lower().split()
    return {tuple(toks[i:i + n]) for i in range(max(0, len(toks) - n + 1))}


def boilerplate_lines(boilerplate: str, content: str = "") -> list[str]:
    """The lines of a page's boilerplate that hold none of its main text (no 8-word run
    in common with ``content``): the visible-lines diff of a gold page keeps a paragraph
    that differs from the gold by a character, which is content, not junk."""
    grams = _content_shingles(content)
    out = []
    for line in boilerplate.splitlines():
        line = line.strip()
        if not line:
            continue
        toks = line.lower().split()
        if grams and any(tuple(toks[i:i + 8]) in grams for i in range(max(0, len(toks) - 7))):
            continue
        out.append(line)
    return out


def _nav_items(pool: Sequence[str]) -> list[str]:
    return [x for x in pool if 1 <= len(x.split()) <= 4]


def _legal_lines(pool: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(x for x in pool if _LEGAL.search(x)))


def make_boilerplate(m: Material, rng: random.Random) -> str:
    lines = boilerplate_lines(m.boilerplate, m.text.text)
    if len(" ".join(lines).split()) < 60:  # a page with little chrome: some of its source's
        pool = list(m.boilerplate_pool)
        lines = _fill(lines, lambda: rng.sample(pool, min(len(pool), 10)) if pool else ["Home"], 60)
    return "\n".join(lines)


def make_navigation(m: Material, rng: random.Random) -> str:
    items = list(m.nav_items if m.nav_items is not None else _nav_items(m.boilerplate_pool))
    items = items or ["Home", "News", "About", "Contact"]

    def block() -> list[str]:
        chosen = rng.sample(items, min(len(items), rng.randint(5, 12)))
        if rng.random() < 0.4:
            return [rng.choice(_SEPARATORS).join(chosen)]
        return chosen

    return "\n".join(_fill([], block, rng.randint(60, 180)))


def make_link_list(m: Material, rng: random.Random) -> str:
    sentences = m.sentences or [m.text.text]

    def item() -> list[str]:
        out = [_headline(rng.choice(sentences), rng)]
        roll = rng.random()
        if roll < 0.4:
            out.append(_date(rng))
        elif roll < 0.6:
            out.append(f"{rng.randint(2, 15)} min read")
        if rng.random() < 0.3:
            out.append(rng.choice(_READ_MORE))
        return out

    header = [rng.choice(("Related articles", "More stories", "Latest news", "You may also like",
                          "Most read", "Archives", "Recent posts"))]
    return "\n".join(_fill(header, item, rng.randint(80, 220)))


def make_listing(m: Material, rng: random.Random) -> str:
    words = [w for w in m.keywords(40) if w.isalpha()] or ["item"]

    def product() -> list[str]:
        name = " ".join(w.capitalize() for w in rng.sample(words, min(len(words), rng.randint(2, 4))))
        if rng.random() < 0.5:
            name += f" {rng.choice(('Pro', 'Plus', 'Set', 'Kit', 'XL', 'Mini', '2.0'))}"
        price = f"${rng.randint(5, 400)}.{rng.choice(('99', '95', '00', '49'))}"
        out = [name, price]
        if rng.random() < 0.5:
            out[-1] += f" ${float(price[1:]) * 1.3:.2f}"
        if rng.random() < 0.5:
            out.append(f"{'★' * rng.randint(3, 5)}{'☆' * rng.randint(0, 2)} ({rng.randint(1, 900)})")
        out.append(rng.choice(_BUTTONS))
        return out

    return "\n".join(_fill([], product, rng.randint(80, 200)))


def make_keyword_spam(m: Material, rng: random.Random) -> str:
    kw = m.keywords(8)

    def phrase() -> list[str]:
        a, b, c = (rng.choice(kw) for _ in range(3))
        line = rng.choice(_SPAM).format(a=a, b=b, c=c, y=rng.randint(2015, 2025))
        line = line[0].upper() + line[1:]
        if rng.random() < 0.5:
            return [line + rng.choice((".", "!", "!!!", ""))]
        return [f"{line}. {rng.choice(_SPAM).format(a=b, b=a, c=c, y=rng.randint(2015, 2025))}."]

    lines = _fill([], phrase, rng.randint(80, 200))
    lines.append("Tags: " + ", ".join(rng.choice(kw) + (" " + rng.choice(kw) if rng.random() < 0.5 else "")
                                      for _ in range(rng.randint(10, 25))))
    return "\n".join(lines)


def make_templated(m: Material, rng: random.Random) -> str:
    kw, places = m.keywords(6), m.capitalised()
    template = rng.choice(_TEMPLATES)
    paragraphs = []
    for _ in range(rng.randint(4, 9)):
        paragraphs.append(template.format(kw=rng.choice(kw[:3]), kw2=rng.choice(kw), place=rng.choice(places),
                                          year=rng.randint(2015, 2025)))
    return "\n\n".join(paragraphs)


def _paragraphs(sentences: list[str], rng: random.Random) -> str:
    """Sentences grouped into paragraphs of two to five, as a page shows them."""
    out, i = [], 0
    while i < len(sentences):
        k = rng.randint(2, 5)
        out.append(" ".join(sentences[i:i + k]))
        i += k
    return "\n\n".join(out)


def make_word_salad(m: Material, rng: random.Random) -> str:
    words = list(m.words) or ["word"]
    rng.shuffle(words)
    n = min(len(words), rng.randint(120, 400))
    sentences, i = [], 0
    while i < n:
        k = rng.randint(6, 18)
        chunk = words[i:i + k]
        i += k
        sentences.append(" ".join([chunk[0].capitalize(), *chunk[1:]]) + rng.choice(".....?!"))
    return _paragraphs(sentences, rng)


def make_machine_made(m: Material, rng: random.Random) -> str:
    """A word-bigram chain over this text and up to four others of its topic: each step
    picks the next word among those that followed the current one anywhere in the pool."""
    pool = [m.text, *rng.sample(list(m.same_topic), min(4, len(m.same_topic)))]
    follow: dict[str, list[str]] = {}
    for item in pool:
        toks = _TOKEN.findall(" ".join(item.text.split()))
        for a, b in zip(toks, toks[1:]):
            follow.setdefault(a, []).append(b)
    starts = [t for t in follow if t[:1].isupper()] or list(follow) or ["The"]
    out = [rng.choice(starts)]
    target = rng.randint(150, 400)
    while len(out) < target or not out[-1].endswith((".", "!", "?")):
        nxt = follow.get(out[-1])
        out.append(rng.choice(nxt) if nxt else rng.choice(starts))
        if len(out) > 2 * target:  # no sentence end in reach: end it here
            out[-1] += "."
    sentences, current = [], []
    for tok in out:
        current.append(tok)
        if tok.endswith((".", "!", "?")):
            sentences.append(" ".join(current))
            current = []
    return _paragraphs(sentences, rng)


def make_repetition(m: Material, rng: random.Random) -> str:
    sentences = m.sentences or [m.text.text[:200]]
    loop = rng.sample(sentences, min(len(sentences), rng.randint(1, 3)))
    head = sentences[: rng.randint(0, 3)]
    body = loop * rng.randint(6, 15)
    sep = rng.choice((" ", "\n", "\n\n"))
    return sep.join(head + body)


def make_cookie_legal(m: Material, rng: random.Random) -> str:
    legal = list(m.legal_lines if m.legal_lines is not None else _legal_lines(m.boilerplate_pool)) or [
        "We use cookies to improve your experience. By continuing you agree to our Cookie Policy."]
    return "\n".join(_fill([], lambda: [rng.choice(legal)], rng.randint(60, 160)))


def make_truncated(m: Material, rng: random.Random) -> str:
    words = m.text.text.split()
    cut = rng.randint(50, 90)
    teaser = " ".join(words[:cut]).rstrip(".,;:") + rng.choice(("…", "...", " …", ""))
    prompts = rng.sample(_PAYWALL, rng.randint(2, 4))
    return "\n".join([teaser, *prompts])


MAKERS: dict[str, Callable[[Material, random.Random], str]] = {
    kind: globals()[f"make_{kind}"] for kind in KINDS}


@dataclass(frozen=True)
class JunkText:
    """One junk text, with the kind that made it and the good text it was made from."""

    text: str
    kind: str
    source: str  # the source set of the good text it was made from
    topic: str  # that text's topic
    unit: str  # that text's unit (a site): splits keep it with its good text
    made_from: str  # the good text's id


def make_junk(materials: Sequence[Material], kinds: Sequence[str] = KINDS, *, per_kind: int | None = None,
              seed: int = 0, min_words: int = 30) -> list[JunkText]:
    """Junk of each of ``kinds``: material ``i`` gives one text of kind ``kinds[i % n]``
    (so each kind gets the topics of all the material), or with ``per_kind`` that many of
    each kind from the materials taken in a seeded random order (so each kind draws on
    every source). Texts under ``min_words`` words are skipped."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown junk kinds {sorted(unknown)}; known: {list(KINDS)}")
    rng = random.Random(seed)
    jobs: Iterable[tuple[Material, str]]
    if per_kind is None:
        jobs = ((m, kinds[i % len(kinds)]) for i, m in enumerate(materials))
    else:
        order = list(range(len(materials)))
        random.Random(seed + 1).shuffle(order)
        jobs = ((materials[order[(k * per_kind + j) % len(order)]], kind)
                for k, kind in enumerate(kinds) for j in range(per_kind))
    out = []
    for m, kind in jobs:
        text = MAKERS[kind](m, rng).strip()
        if len(text.split()) >= min_words:
            t = m.text
            out.append(JunkText(text, kind, t.source, t.topic, t.unit, t.id))
    return out


def materials_for(texts: Sequence[KindText], boilerplate: dict[str, str] | None = None) -> list[Material]:
    """One :class:`Material` per text: its topic's other texts, its page's boilerplate
    (``boilerplate``: text id -> the page's boilerplate lines), and the boilerplate lines
    of every page of its source (content lines left out)."""
    boilerplate = boilerplate or {}
    by_topic: dict[str, list[KindText]] = {}
    pools: dict[str, list[str]] = {}
    for t in texts:
        by_topic.setdefault(t.topic, []).append(t)
        if t.id in boilerplate:
            pools.setdefault(t.source, []).extend(boilerplate_lines(boilerplate[t.id], t.text))
    pools = {k: list(dict.fromkeys(v)) for k, v in pools.items()}
    every = list(dict.fromkeys(x for v in pools.values() for x in v))
    nav = {k: _nav_items(v) for k, v in [*pools.items(), ("", every)]}
    legal = {k: _legal_lines(v) for k, v in [*pools.items(), ("", every)]}
    out = []
    for t in texts:
        peers = [p for p in by_topic[t.topic][:51] if p.id != t.id][:50]
        key = t.source if pools.get(t.source) else ""
        out.append(Material(t, peers, boilerplate.get(t.id, ""), pools.get(t.source) or every,
                            nav_items=nav[key], legal_lines=legal[key]))
    return out


__all__ = ["KINDS", "MAKERS", "JunkText", "Material", "boilerplate_lines", "make_junk", "materials_for"]
