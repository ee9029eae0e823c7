"""The cheap gates in front of PII detectors and safety term counts never change a result.

PII: each kind's hint must be a necessary condition of its pattern (a text without the
hint cannot hold that kind), so every span a detector finds must itself contain the
hint. Safety: counting only at positions that can start a term gives the counts of a
plain scan of every position.
"""

from __future__ import annotations

import random

from afm.filters import pii
from afm.filters.safety import TermMatcher

POSITIVE = (
    "Call (415) 555-2671 or +44 20 7946 0958 today. Mail jane.roe@gmail.com please. "
    "Server 8.8.8.8 and 2607:f8b0:4005:805::200e answered. Card 4111 1111 1111 1111 "
    "or 5500-0000-0000-0004. IBAN GB82 WEST 1234 5698 7654 32. SSN 123-45-6789. "
    "1600 Pennsylvania Avenue NW, Washington, DC 20500."
)


def test_every_found_span_holds_its_kinds_hint() -> None:
    detector = pii.PiiDetector(phone_regions=["US", "GB"])
    detectors = {"email": detector._emails, "phone": detector._phones, "card": detector._cards,
                 "iban": detector._ibans, "ssn": detector._ssns, "address": detector._addresses}
    kinds_found = set()
    for kind, find in detectors.items():
        for span in find(POSITIVE):
            kinds_found.add(kind)
            assert pii._HINTS[kind](POSITIVE[span.start:span.end]), (kind, span)
    assert kinds_found == set(detectors)
    ips = detector._ips(POSITIVE)
    assert {s.value for s in ips} == {"8.8.8.8", "2607:f8b0:4005:805::200e"}
    for span in ips:
        text = POSITIVE[span.start:span.end]
        assert pii._IPV4_HINT.search(text) or pii._IPV6_HINT.search(text)


def test_text_without_hints_costs_no_detector_and_finds_nothing() -> None:
    prose = "The river runs past the old mill, under a stone bridge: 1999 was a dry year. " * 50
    assert pii.PiiDetector().find(prose) == []
    assert not any(hint(prose) for hint in pii._HINTS.values() if hint is not pii._HINTS["phone"])


def _plain_count(terms: list[str], tokens: list[str]) -> tuple[int, set[str]]:
    hits, found = 0, set()
    for term in terms:
        toks = term.split()
        for i in range(len(tokens) - len(toks) + 1):
            if tokens[i:i + len(toks)] == toks:
                hits += 1
                found.add(term)
    return hits, found


def test_term_counts_match_a_scan_of_every_position() -> None:
    terms = ["spam", "free spins", "online casino", "casino", "buy cheap pills now", "cheap"]
    matcher = TermMatcher(terms)
    rng = random.Random(0)
    vocab = ["free", "spins", "online", "casino", "buy", "cheap", "pills", "now", "spam", "river"]
    for _ in range(300):
        tokens = [rng.choice(vocab) for _ in range(rng.randrange(0, 30))]
        assert matcher.count(tokens) == _plain_count(terms, tokens)
