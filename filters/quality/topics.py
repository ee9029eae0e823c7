"""The topic of a text, by keyword counts: for reporting keep rates per topic and for
balancing a quality model's training data across topics, never for deciding a document.

A quality filter must judge the writing, not the subject: a clean article about politics
or air pollution is as good as one about gardening. To see whether a filter (or a model's
training data) leans on topic, texts are grouped by subject and each group's keep rate is
compared with the average. Sets with human topic labels are rare, so the topic here is the
subject whose keyword list a text hits most often (whole-word matches, case
folded), at least :data:`MIN_HITS` times; otherwise ``other``. The lists are short and
written for this purpose (English; a text in another language is mostly ``other``); the
grouping is coarse, which is all a keep-rate comparison needs.
"""

from __future__ import annotations

import re
from collections import Counter

MIN_HITS = 3
_WORD = re.compile(r"[a-z][a-z'-]+")

TOPICS: dict[str, tuple[str, ...]] = {
    "politics": (
        "election", "elections", "vote", "voters", "voting", "parliament", "senate", "senator",
        "congress", "minister", "ministers", "government", "governor", "president", "presidential",
        "campaign", "party", "democrats", "republicans", "republican", "democratic", "labour",
        "conservative", "policy", "lawmakers", "legislation", "mayor", "council", "referendum",
        "opposition", "coalition", "impeachment", "diplomat", "diplomatic", "sanctions", "brexit",
        "white house", "prime", "cabinet", "politics", "political", "politician", "politicians"),
    "royalty_celebrity": (
        "queen", "king", "prince", "princess", "royal", "royals", "duke", "duchess", "palace",
        "monarch", "monarchy", "throne", "coronation", "celebrity", "celebrities", "actor",
        "actress", "singer", "star", "stars", "hollywood", "film", "movie", "movies", "album",
        "concert", "festival", "fans", "tv", "television", "show", "series", "episode", "oscar",
        "grammy", "wedding", "band", "music", "musician"),
    "crime_law": (
        "police", "officers", "arrested", "arrest", "court", "judge", "jury", "trial", "guilty",
        "murder", "killed", "shooting", "crime", "criminal", "prison", "sentenced", "charged",
        "lawsuit", "attorney", "lawyer", "lawyers", "prosecutor", "prosecutors", "investigation",
        "suspect", "victim", "victims", "fraud", "theft", "robbery", "convicted", "legal"),
    "business_finance": (
        "company", "companies", "market", "markets", "shares", "stock", "stocks", "investors",
        "investment", "revenue", "profit", "profits", "sales", "bank", "banks", "economy",
        "economic", "inflation", "interest", "rates", "billion", "million", "ceo", "business",
        "businesses", "industry", "trade", "tax", "taxes", "prices", "price", "customers",
        "finance", "financial", "loan", "mortgage", "insurance", "startup", "retail"),
    "technology": (
        "software", "app", "apps", "computer", "computers", "internet", "online", "data",
        "digital", "google", "apple", "microsoft", "amazon", "facebook", "smartphone", "phone",
        "device", "devices", "code", "programming", "developer", "developers", "server", "cloud",
        "ai", "algorithm", "network", "users", "user", "website", "browser", "linux", "windows",
        "api", "database", "cyber", "hackers", "security", "chip", "robot", "technology"),
    "science_environment": (
        "scientists", "researchers", "research", "study", "studies", "university", "climate",
        "pollution", "air", "emissions", "carbon", "environment", "environmental", "species",
        "wildlife", "ocean", "energy", "solar", "physics", "chemistry", "biology", "space",
        "nasa", "planet", "earth", "temperature", "weather", "forest", "water", "fossil",
        "experiment", "laboratory", "evolution", "genetic", "astronomers", "scientific"),
    "health": (
        "health", "patients", "patient", "doctor", "doctors", "hospital", "hospitals", "disease",
        "medical", "medicine", "treatment", "cancer", "virus", "vaccine", "vaccines", "covid",
        "symptoms", "drug", "drugs", "nurses", "care", "mental", "diet", "nutrition", "exercise",
        "fitness", "pain", "therapy", "clinical", "infection", "diabetes", "heart", "surgery"),
    "sport": (
        "game", "games", "team", "teams", "season", "league", "match", "player", "players",
        "coach", "win", "won", "championship", "cup", "goal", "goals", "football", "soccer",
        "basketball", "baseball", "tennis", "golf", "olympic", "olympics", "score", "scored",
        "tournament", "nfl", "nba", "fifa", "race", "racing", "athletes", "stadium", "victory"),
    "lifestyle_travel_food": (
        "recipe", "recipes", "food", "cooking", "kitchen", "restaurant", "restaurants", "chef",
        "travel", "trip", "hotel", "hotels", "beach", "tourists", "tourism", "vacation", "fashion",
        "style", "home", "garden", "gardening", "wine", "coffee", "dinner", "breakfast", "cake",
        "flavor", "taste", "ingredients", "bake", "holiday", "wedding", "beauty", "shopping"),
    "conflict_military": (
        "war", "military", "army", "troops", "soldiers", "attack", "attacks", "forces",
        "missile", "missiles", "weapons", "bomb", "bombing", "terror", "terrorist", "terrorism",
        "conflict", "refugees", "nato", "defense", "defence", "ceasefire", "invasion", "rebels"),
    "education_culture": (
        "school", "schools", "students", "student", "teacher", "teachers", "education",
        "university", "college", "learning", "book", "books", "author", "novel", "history",
        "museum", "art", "artist", "artists", "culture", "church", "religion", "religious",
        "faith", "god", "language", "library", "poetry", "writing", "philosophy"),
}

_LOOKUP: dict[str, list[str]] = {}
for _topic, _words in TOPICS.items():
    for _w in _words:
        _LOOKUP.setdefault(_w, []).append(_topic)
_PHRASES = {w: ts for w, ts in _LOOKUP.items() if " " in w}


def topic_counts(text: str) -> Counter:
    """Keyword hits per topic (a word in two lists counts for both)."""
    low = (text or "").lower()
    hits: Counter = Counter()
    for word in _WORD.findall(low):
        for topic in _LOOKUP.get(word, ()):
            hits[topic] += 1
    for phrase, topics in _PHRASES.items():
        n = low.count(phrase)
        for topic in topics:
            hits[topic] += n
    return hits


def topic_of(text: str, min_hits: int = MIN_HITS) -> str:
    """The topic with the most keyword hits (ties: the first in :data:`TOPICS`), or
    ``other`` when none has ``min_hits``."""
    hits = topic_counts(text)
    if not hits:
        return "other"
    best = max(TOPICS, key=lambda t: (hits.get(t, 0), -list(TOPICS).index(t)))
    return best if hits.get(best, 0) >= min_hits else "other"


__all__ = ["MIN_HITS", "TOPICS", "topic_counts", "topic_of"]
