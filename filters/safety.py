"""Safety and profanity filtering: word lists, URL block-lists and a fastText classifier.

Following the AFM report (§3.1.1, §7.2) the filter combines heuristics with a
model-based classifier, and - because the report warns against over-aggressive
filtering at pre-training (the model must still know such content exists) - it drops
only clear cases by default:

* **URL**: the host or a parent domain is on a block-list (a small shipped default of
  well-known adult sites, plus user files), an adult-only TLD (``.xxx``, ``.porn``...),
  or an adult token in the host name (``freeporn-tube.net``) -> ``blocked_url`` /
  ``adult_url``.
* **Word lists** (written for afm, in ``data/safety``; English always plus the
  document's language when a list exists): adult, profanity, hate (slurs) and spam
  terms, counted per word of the document. A document is dropped only when a ratio
  *and* a minimum number of hits are both exceeded - one quoted slur in a news article
  or one swear word in a forum post is kept.
* **Model**: the fastText classifier ``data/safety/safety.ftz`` (trained by
  ``afm classifier train`` on synthetic data the project ships) gives ``safety_score`` =
  P(unsafe). Alone it drops nothing unless the score is very high (>= 0.98) *and* at
  least one listed term occurs, so out-of-domain text it has never seen is not removed
  on the model's word alone.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from afm.filters.base import Decision
from afm.filters.classifier import FastTextClassifier
from afm.filters.language import load_lid_model
from afm.schema import Document

DATA_DIR = Path(__file__).resolve().parent / "data" / "safety"
DEFAULT_MODEL = DATA_DIR / "safety.ftz"
CATEGORIES = ("adult", "profanity", "hate", "spam")
_WORD = re.compile(r"\w+")
_HOST_SPLIT = re.compile(r"[.\-_]")


@dataclass
class SafetyConfig:
    """Thresholds of the safety filter; defaults drop only clear cases."""

    languages: list[str] = field(default_factory=lambda: ["en", "de", "es", "fr"])
    wordlist_dir: str | None = None  # default: the shipped data/safety
    extra_wordlists: dict[str, list[str]] = field(default_factory=dict)  # category -> files
    blocklist_files: list[str] = field(default_factory=list)  # user domain block-lists
    use_default_blocklist: bool = True
    adult_url_tokens: list[str] = field(
        default_factory=lambda: ["porn", "xxx", "hentai", "sexcam", "camgirl", "xvideo", "nsfw"]
    )
    # A category drops a document when BOTH its ratio (hits per word) and hit count pass.
    adult_max_ratio: float = 0.02
    adult_min_hits: int = 5
    hate_max_ratio: float = 0.01
    hate_min_hits: int = 3
    profanity_max_ratio: float = 0.05
    profanity_min_hits: int = 10
    spam_max_ratio: float = 0.03
    spam_min_hits: int = 5
    use_model: bool = True
    model_path: str | None = None  # default: data/safety/safety.ftz
    model_drop_threshold: float = 0.98
    model_requires_term: bool = True  # the model drops only with >= 1 listed term present
    max_chars: int = 100_000  # text scanned for terms (and given to the model)


# ---------------------------------------------------------------------------- word lists


def read_list(path: str | Path) -> list[str]:
    """Lower-cased entries of a one-per-line list; ``#`` comments and blanks skipped."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip().lower()
        if line:
            out.append(" ".join(_WORD.findall(line)) if " " in line else line)
    return out


class TermMatcher:
    """Counts single words and multi-word phrases of a term list in a token sequence."""

    def __init__(self, terms: list[str]) -> None:
        self.words = {t for t in terms if " " not in t}
        self.phrases: dict[int, set[tuple[str, ...]]] = {}
        for t in terms:
            if " " in t:
                toks = tuple(t.split())
                self.phrases.setdefault(len(toks), set()).add(toks)
        # A phrase can only start at a token that starts some phrase: only those positions
        # are looked at (a few per document, instead of every position for every length).
        self.firsts = {toks[0] for phrases in self.phrases.values() for toks in phrases}
        self.lookups = self.words | self.firsts

    def count(self, tokens: list[str]) -> tuple[int, set[str]]:
        """(number of hits, distinct terms hit)."""
        hits = 0
        found: set[str] = set()
        lookups = self.lookups.intersection(tokens)  # one pass in C; most texts: empty
        if not lookups:
            return 0, found
        words, firsts = self.words, self.firsts
        for i, tok in enumerate(tokens):
            if tok not in lookups:
                continue
            if tok in words:
                hits += 1
                found.add(tok)
            if tok in firsts:
                for n, phrases in self.phrases.items():
                    gram = tuple(tokens[i : i + n])
                    if len(gram) == n and gram in phrases:
                        hits += 1
                        found.add(" ".join(gram))
        return hits, found


@lru_cache(maxsize=8)
def _load_lists(wordlist_dir: str, languages: tuple[str, ...]) -> dict[str, dict[str, list[str]]]:
    """``{language: {category: terms}}`` from ``words.<category>.<lang>.txt`` files."""
    root = Path(wordlist_dir)
    out: dict[str, dict[str, list[str]]] = {}
    for lang in languages:
        for cat in CATEGORIES:
            path = root / f"words.{cat}.{lang}.txt"
            if path.is_file():
                out.setdefault(lang, {})[cat] = read_list(path)
    return out


def _host(url: str | None) -> str:
    if not url:
        return ""
    try:
        host = urlsplit(url if "//" in url else "//" + url).hostname or ""
    except ValueError:
        return ""
    host = host.lower().rstrip(".")
    return host[4:] if host.startswith("www.") else host


# ---------------------------------------------------------------------------- filter


class SafetyFilter:
    """Drops clearly unsafe documents; sets ``safety_score`` (P(unsafe)) on every document."""

    name = "safety"

    def __init__(self, cfg: SafetyConfig | None = None) -> None:
        self.cfg = cfg or SafetyConfig()
        cfg = self.cfg
        lists = _load_lists(str(cfg.wordlist_dir or DATA_DIR), tuple(cfg.languages))
        extra = {cat: [t for f in files for t in read_list(f)] for cat, files in cfg.extra_wordlists.items()}
        unknown = set(extra) - set(CATEGORIES)
        if unknown:
            raise ValueError(f"unknown word-list categories {sorted(unknown)}; known: {CATEGORIES}")
        # Matchers per language: English terms always apply (the web mixes languages).
        self._matchers: dict[str, dict[str, TermMatcher]] = {}
        base = lists.get("en", {})
        for lang in set(lists) | {"en"}:
            per = lists.get(lang, {})
            self._matchers[lang] = {
                cat: TermMatcher(sorted(set(base.get(cat, []) + per.get(cat, []) + extra.get(cat, []))))
                for cat in CATEGORIES
            }
        self._domains: set[str] = set()
        self._tlds: set[str] = set()
        if cfg.use_default_blocklist:
            self._domains.update(read_list(DATA_DIR / "blocked_domains.txt"))
            self._tlds.update(read_list(DATA_DIR / "blocked_tlds.txt"))
        for path in cfg.blocklist_files:
            if not Path(path).is_file():
                raise FileNotFoundError(f"safety block-list not found: {path}")
            self._domains.update(d.removeprefix("www.") for d in read_list(path))
        self._url_tokens = [t.lower() for t in cfg.adult_url_tokens]
        self._model = None
        if cfg.use_model:
            self._model = FastTextClassifier(cfg.model_path or DEFAULT_MODEL)

    def __getstate__(self) -> dict[str, Any]:  # picklable for Beam: rebuilt on the worker
        return {"cfg": self.cfg}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cfg"])  # type: ignore[misc]

    def url_verdict(self, url: str | None) -> str | None:
        """``blocked_url`` / ``adult_url`` / None for a document URL."""
        host = _host(url)
        if not host:
            return None
        parts = host.split(".")
        if parts[-1] in self._tlds:
            return "blocked_url"
        for i in range(len(parts) - 1):
            if ".".join(parts[i:]) in self._domains:
                return "blocked_url"
        for token in _HOST_SPLIT.split(host):
            if any(t in token for t in self._url_tokens):
                return "adult_url"
        return None

    def term_counts(self, text: str, language: str | None = None) -> dict[str, tuple[int, set[str]]]:
        tokens = _WORD.findall(text[: self.cfg.max_chars].lower())
        matchers = self._matchers.get((language or "en").lower(), self._matchers["en"])
        return {cat: m.count(tokens) for cat, m in matchers.items()} | {"_words": (len(tokens), set())}

    def __call__(self, doc: Document) -> Decision:
        cfg = self.cfg
        text = doc.get("text") or ""
        counts = self.term_counts(text, doc.get("language"))
        n_words = max(counts.pop("_words")[0], 1)
        signals: dict[str, float] = {}
        for cat, (hits, _terms) in counts.items():
            signals[f"{cat}_hits"] = float(hits)
            signals[f"{cat}_ratio"] = hits / n_words
        url_reason = self.url_verdict(doc.get("url"))
        signals["url_blocked"] = 1.0 if url_reason else 0.0
        if self._model is not None:
            score = float(self._model.score([text[: cfg.max_chars]])[0])
            signals["model_score"] = score
        else:
            score = min(1.0, max(signals["adult_ratio"] / cfg.adult_max_ratio,
                                 signals["hate_ratio"] / cfg.hate_max_ratio) / 2)
        out: dict[str, Any] = dict(doc)
        out["safety_score"] = score

        def drop(reason: str, **details: Any) -> Decision:
            return Decision(False, reason, signals, out, details)  # type: ignore[arg-type]

        if url_reason:
            return drop(url_reason, host=_host(doc.get("url")))
        limits = {
            "adult": (cfg.adult_max_ratio, cfg.adult_min_hits),
            "hate": (cfg.hate_max_ratio, cfg.hate_min_hits),
            "profanity": (cfg.profanity_max_ratio, cfg.profanity_min_hits),
            "spam": (cfg.spam_max_ratio, cfg.spam_min_hits),
        }
        for cat, (max_ratio, min_hits) in limits.items():
            hits, terms = counts[cat]
            if hits >= min_hits and signals[f"{cat}_ratio"] >= max_ratio:
                return drop(f"{cat}_terms", terms=sorted(terms)[:20], hits=hits,
                            ratio=round(signals[f"{cat}_ratio"], 4), threshold=max_ratio, min_hits=min_hits)
        any_term = sum(counts[c][0] for c in ("adult", "hate", "profanity")) > 0
        if self._model is not None and score >= cfg.model_drop_threshold and (
            any_term or not cfg.model_requires_term
        ):
            return drop("unsafe_model", score=round(score, 4), threshold=cfg.model_drop_threshold)
        return Decision(True, None, signals, out)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- training data
#
# The shipped classifier is trained on synthetic documents generated here, so the project
# can ship and regenerate its own training data (no third-party corpus). Negatives include
# hard cases that share vocabulary with unsafe pages but are not unsafe: sexual-health
# and medical text, crime reporting, art history, dating advice, LGBT news.

_SAFE_SLOTS = {
    "city": ["Portland", "Leeds", "Lyon", "Osaka", "Denver", "Cork", "Austin", "Perth", "Turin"],
    "org": ["the city council", "the university", "the health ministry", "a local charity",
            "the school board", "the museum", "the research institute", "the water utility"],
    "topic": ["the new library", "bus routes", "flood defences", "the budget", "teacher pay",
              "bike lanes", "the hospital wing", "recycling rules", "housing permits"],
    "food": ["lentil soup", "roast chicken", "banana bread", "mushroom risotto", "fish tacos",
             "apple pie", "vegetable curry", "pancakes"],
    "ingredient": ["garlic", "onions", "butter", "fresh basil", "olive oil", "cumin", "lemon zest",
                   "brown sugar", "flour"],
    "team": ["the home side", "the visitors", "United", "the Rangers", "the national team"],
    "sport": ["football", "cricket", "basketball", "rugby", "tennis", "hockey"],
    "device": ["the new phone", "the laptop", "the router", "the smartwatch", "the camera"],
    "feature": ["battery life", "the display", "the keyboard", "the update", "the speakers"],
    "science": ["the telescope", "the vaccine trial", "the climate model", "the fossil", "the enzyme"],
    "condition": ["diabetes", "breast cancer", "asthma", "sexually transmitted infections",
                  "prostate cancer", "depression", "high blood pressure"],
    "artist": ["Titian", "Rodin", "Goya", "Botticelli", "Manet", "Klimt"],
    "number": ["three", "twelve", "40", "2,500", "a dozen", "several hundred", "15"],
    "year": ["1998", "2004", "2012", "2019", "2021", "1875"],
}
_SAFE_TEMPLATES = [
    "{org} in {city} voted on {topic} after a long debate on Tuesday evening.",
    "Residents of {city} asked {org} to publish the full report on {topic}.",
    "The plan for {topic} will cost about {number} million and take {number} months.",
    "To make {food}, soften {ingredient} in a pan, then add {ingredient} and simmer gently.",
    "This {food} recipe serves four and keeps well in the fridge for {number} days.",
    "Season with {ingredient} and a pinch of salt before serving the {food}.",
    "{team} won the {sport} match by {number} points in front of a packed stadium.",
    "The coach said {team} had trained hard all season and deserved the result.",
    "In our review, {device} impressed us with {feature}, though the price is high.",
    "The firmware update for {device} improves {feature} and fixes several bugs.",
    "Scientists studying {science} published their results in a peer-reviewed journal.",
    "The team behind {science} hopes to share data with other labs by {year}.",
    "Doctors recommend regular screening for {condition}, especially after age 50.",
    "The clinic offers free, confidential testing for {condition} every weekday.",
    "Sex education classes cover consent, contraception and how to prevent {condition}.",
    "Police arrested a man in {city} on charges of fraud; he will appear in court next week.",
    "The court heard that the defendant had threatened a neighbour during an argument.",
    "{artist}'s famous nude portrait hangs in the museum's main gallery.",
    "Art historians say {artist} painted the reclining nude in {year} for a private patron.",
    "Dating advice columnists say honest conversation matters more than a perfect first date.",
    "Same-sex couples in {city} celebrated the court ruling on marriage equality.",
    "The gay and lesbian film festival returns to {city} with {number} screenings.",
    "Breastfeeding mothers can get support from midwives at the {city} clinic.",
    "The history society will hold a talk on the railway that reached {city} in {year}.",
    "Students who miss the deadline can apply for an extension through the online portal.",
    "Interest rates rose again, and analysts expect mortgage costs to climb in {year}.",
    "The novel follows a young woman who leaves {city} to study medicine.",
    "Volunteers planted {number} trees along the river path on Saturday morning.",
    "Researchers found that sleep and exercise reduce the risk of {condition}.",
    "The report on human sexuality and reproductive health was released by {org}.",
]
_UNSAFE_SLOTS = {
    "adj": ["hot", "horny", "naughty", "sexy", "wild", "busty", "kinky", "amateur", "nasty"],
    "who": ["milf", "mature women", "housewives", "sluts", "camgirls", "college girls", "pornstars",
            "babes", "couples"],
    "act": ["blowjob", "hardcore sex", "threesome", "anal", "gangbang", "masturbation",
            "deepthroat", "creampie", "orgy"],
    "thing": ["porn videos", "xxx movies", "sex tapes", "nude pics", "sex cams", "porno clips",
              "erotic videos", "adult videos"],
    "site": ["xxx tube", "porn hub", "sex cam site", "free porn site", "adult chat"],
    "number": ["1000", "10,000", "50,000", "100+", "24/7", "millions of"],
    "slur": ["niggers", "kikes", "faggots", "spics", "ragheads", "chinks", "trannies"],
    "group": ["immigrants", "those people", "foreigners", "they"],
}
_UNSAFE_TEMPLATES = [
    "Watch free {thing} of {adj} {who} in HD, updated daily on the best {site}.",
    "{number} {adj} {who} waiting for you, click to see {act} live now.",
    "Best {act} {thing} online, {adj} {who} get fucked hard, no signup needed.",
    "Free {act} porn, {adj} {who} with big tits and wet pussy, watch now.",
    "Chat with {adj} {who} on webcam, live sex shows {number} hours a day.",
    "Top rated {thing}: {adj} {who} doing {act}, full length xxx videos.",
    "Hot nude {who} show their tits and pussy on our {site}, totally free.",
    "Download {thing} of {act} with {adj} {who}, uncensored and explicit.",
    "Horny {who} want a {act} tonight, meet local sluts for sex now.",
    "She moaned as he fucked her pussy hard, a {adj} {act} scene with {who}.",
    "Explicit {act} with {adj} {who}, cum on tits, xxx porno in full HD.",
    "{site} has {number} {thing}, categories: {act}, {who}, fetish, bdsm.",
    "The {slur} are ruining this country and should all be thrown out.",
    "I hate {slur}, {group} are animals and do not deserve to live here.",
    "Get rid of the {slur}, they are subhuman filth and vermin.",
    "Every one of those {slur} is a criminal, kill them all.",
]


def _fill(template: str, slots: dict[str, list[str]], rng: random.Random) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: rng.choice(slots[m.group(1)]), template)


_FILLER_TOKENS = ["2019", "12", "$45", "3.5", "(AP)", '"quoted"', "'s", "-", "10%", "#1", "U.S.", "&"]


def generic_vocabulary(limit: int = 6000) -> list[str]:
    """Frequent words of many languages (the dictionary of the lid.176 language-ID model,
    frequency-ordered), minus every listed safety term: the "anything else" of the web."""

    lists = _load_lists(str(DATA_DIR), ("en", "de", "es", "fr"))
    listed = {t for per in lists.values() for terms in per.values() for t in terms for t in t.split()}
    words = [w.lower() for w in load_lid_model().get_words() if w.isalpha() and len(w) > 1]
    seen: set[str] = set()
    out = []
    for w in words:
        if w not in listed and w not in seen:
            seen.add(w)
            out.append(w)
    return out[:limit]


def make_safety_training_data(
    n_per_class: int = 1000, seed: int = 0, vocabulary: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """Synthetic ``(unsafe, safe)`` documents.

    A bag-of-words classifier trained only on templates learns that every unfamiliar
    word means "unsafe" or "safe" at random. So both classes also carry *generic text*:
    word sequences drawn (Zipf-weighted) from a broad multilingual vocabulary. Safe
    documents are template sentences or generic text; unsafe documents are unsafe
    template sentences interleaved with generic text. The classifier then has to rely on
    the unsafe vocabulary itself, and unseen ordinary text scores low.
    """
    rng = random.Random(seed)
    vocab = list(vocabulary if vocabulary is not None else generic_vocabulary())
    weights = [1.0 / (rank + 20) for rank in range(len(vocab))]
    # Ordinary words of the unsafe templates ("free", "watch", "live", "women"...) are
    # given a high weight in generic text, which both classes carry, so they do not
    # become unsafe cues by appearing only next to unsafe terms.
    lists = _load_lists(str(DATA_DIR), ("en",))
    listed = {w for terms in lists.get("en", {}).values() for t in terms for w in t.split()}
    unsafe_text = " ".join(_UNSAFE_TEMPLATES + [v for vs in _UNSAFE_SLOTS.values() for v in vs])
    ordinary = sorted({w for w in _WORD.findall(unsafe_text.lower()) if w not in listed})
    for w in ordinary:
        if w.isalpha():
            vocab.append(w)
            weights.append(1.0 / 25)

    def generic(lo: int, hi: int) -> str:
        # Sentence-shaped (punctuation, digits, quotes), so none of these is a class cue.
        if not vocab:
            return ""
        n, out = rng.randint(lo, hi), []
        while n > 0:
            k = min(n, rng.randint(4, 22))
            words = rng.choices(vocab, weights=weights, k=k)
            if rng.random() < 0.4:
                words.insert(rng.randint(0, k), rng.choice(_FILLER_TOKENS))
            if k > 6 and rng.random() < 0.5:
                words[rng.randint(1, k - 2)] += ","
            out.append(" ".join(words) + rng.choice([".", ".", ".", "?", "!", ":", ";"]))
            n -= k
        return " ".join(out)

    def sentences(templates: list[str], slots: dict[str, list[str]], k: int) -> list[str]:
        return [_fill(rng.choice(templates), slots, rng) for _ in range(k)]

    unsafe = []
    for _ in range(n_per_class):
        parts = sentences(_UNSAFE_TEMPLATES, _UNSAFE_SLOTS, rng.randint(2, 6))
        for _ in range(rng.randint(1, 3)):
            parts.insert(rng.randint(0, len(parts)), generic(20, 120))
        unsafe.append(" ".join(p for p in parts if p))
    safe = []
    for _ in range(n_per_class):
        if rng.random() < 0.5:
            parts = sentences(_SAFE_TEMPLATES, _SAFE_SLOTS, rng.randint(2, 6))
            for _ in range(rng.randint(1, 3)):
                parts.insert(rng.randint(0, len(parts)), generic(20, 120))
        else:
            parts = [generic(30, 300)]
        safe.append(" ".join(p for p in parts if p))
    return unsafe, safe
