"""One page through the selector's cascade: the fast candidates, the gate, then the slow
path (the reference and the vote, or the older switch). This is what the extraction
stage runs."""

from __future__ import annotations

from afm.filters.extraction.candidates import Page, run_candidate
from afm.filters.extraction.decode import page_words
from afm.filters.extraction.features import agreement, switch_features
from afm.filters.extraction.selector import Selector
from afm.filters.extraction.vote import trim_edges, vote_text


def select_text(selector: Selector, html: str, url: str | None,
                texts: dict[str, str] | None = None, page: Page | None = None,
                ) -> tuple[str, dict[str, float]]:
    """The chosen text and the signals of how: the fast candidates' agreement, whether
    the fast path answered and the chosen candidate (its index in ``all_candidates``;
    -1 for the vote). ``texts``: candidates' outputs already computed on this page (run
    again otherwise), with the ``page`` they were computed on."""
    page = page or Page(html, url)
    texts = dict(texts or {})
    for name in selector.fast_candidates:
        if name not in texts:
            texts[name] = run_candidate(name, page)
    agree = agreement(*(texts[n] for n in selector.fast_candidates[:2]))
    chosen = selector.fast_candidates[0]
    fast = agree >= selector.gate
    signals = {"fast_agreement": float(agree), "fast_path": float(fast)}
    if fast and selector.fast_trim:
        first, second = selector.fast_candidates[:2]
        return trim_edges(texts[first], texts[second]), {
            **signals, "candidate": float(selector.all_candidates.index(first))}
    if not fast:
        chosen = selector.reference
        texts[chosen] = run_candidate(chosen, page)
        if selector.votes:
            for name in selector.voters:
                if name not in texts:
                    texts[name] = run_candidate(name, page)
            text = vote_text(texts, selector.reference, selector.voters, selector.min_votes)
            return text, {**signals, "candidate": -1.0}
        if selector.switches:
            for name in selector.others:
                if name not in texts:
                    texts[name] = run_candidate(name, page)
            gain = selector.model.predict(  # type: ignore[union-attr]
                switch_features(texts, selector.reference, selector.others, page_words(html)))
            if gain.max() > selector.tau:
                chosen = selector.others[int(gain.argmax())]
    return texts[chosen], {**signals, "candidate": float(selector.all_candidates.index(chosen))}
