"""One page through the selector: cheap candidates, the gate, the slow candidates only
when the gate opens, the chosen text. This is what the extraction stage runs."""

from __future__ import annotations

from afm.filters.extraction.candidates import Page, run_candidate
from afm.filters.extraction.features import page_features
from afm.filters.extraction.selector import Selector


def select_text(selector: Selector, html: str, url: str | None, page_words: int
                ) -> tuple[str, dict[str, float]]:
    """The chosen candidate's text and signals: which candidate (its index in
    ``selector.all_candidates``), whether the slow path ran, the predicted F1."""
    page = Page(html, url)
    texts = {name: run_candidate(name, page) for name in selector.fast_candidates}
    pred = selector.fast.predict(page_features(texts, selector.fast_candidates, page_words))
    names = selector.fast_candidates
    slow = bool(pred.max() < selector.gate)
    if slow:
        for name in selector.slow_candidates:
            texts[name] = run_candidate(name, page)
        names = selector.all_candidates
        pred = selector.full.predict(page_features(texts, names, page_words))
    best = int(pred.argmax())
    return texts[names[best]], {
        "candidate": float(selector.all_candidates.index(names[best])),
        "slow_path": float(slow),
        "predicted_f1": float(pred[best]),
    }
