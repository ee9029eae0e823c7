"""How the word n-gram model (``quality.word_lm``: an ARPA file ``afm quality train-lm`` writes) is made, and how its
perplexity threshold is chosen, without looking at any set it is reported on.

* **Reference text**: the human-made main texts of WCXB's development split (article,
  forum, documentation and service pages; CC-BY-4.0, so an ARPA file of its n-grams may be
  shipped with its attribution), the sites split by a seeded hash: 70% train the model,
  the other 30% choose the threshold.
* **The model**: a modified Kneser-Ney trigram model (:mod:`afm.filters.quality.ngram_lm`), the
  trigrams seen once pruned, written as gzipped ARPA (a few MB).
* **The threshold**: the perplexity at which the development good text the other document
  stages keep is kept at :data:`KEEP_TARGET` (the held-out WCXB sites, and this machine's
  package docs, READMEs and manual pages, none of which the model read), fixed before the
  junk is scored; the development junk (every kind, made from the held-out sites' pages)
  is then reported at that threshold, never used to move it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from afm.filters.quality.audit import keep_threshold, rule_development_report, signal_values
from afm.filters.quality.defaults import split_units
from afm.filters.quality.ngram_lm import estimate, sentences, write_arpa
from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter
from afm.filters.quality.texts import KindText

ORDER = 3
PRUNE_COUNT = 1  # trigrams seen once are left out (their mass goes to the backoffs)
HELD_OUT = 0.3  # share of the reference sites that choose the threshold
KEEP_TARGET = 0.99  # share of development good text (that the other stages keep) the threshold keeps
PERPLEXITY_DECIMALS = 0  # the threshold rounded up to a whole perplexity
SEED = 0


def split_sites(texts: Sequence[KindText], held_out: float = HELD_OUT, seed: int = SEED
                ) -> tuple[list[KindText], list[KindText]]:
    """(the texts that train the model, the texts of held-out sites)."""
    return split_units(texts, held_out, seed)


def train_word_lm(texts: Sequence[KindText], out: str | Path, *, order: int = ORDER,
                  prune_count: int = PRUNE_COUNT) -> dict[str, Any]:
    """Estimate the model on ``texts`` (each line a sentence) and write it as ARPA."""
    model = estimate((s for t in texts for s in sentences(t.text)), order, prune_count=prune_count)
    path = write_arpa(model, out)
    return {"order": order, "prune_count": prune_count, "texts": len(texts),
            "ngrams": [len(t) for t in model.logprob], "bytes": path.stat().st_size,
            "discounts": [[round(d, 4) for d in ds] for ds in model.discounts]}


def perplexities(lm_path: str | Path, texts: Sequence[str]) -> list[float]:
    """Each text's ``afm_word_perplexity`` as the quality rule computes it (on the prose
    lines: code, markup and quotations set aside); NaN for a text too short for it to
    judge (fewer tokens than ``word_lm_min_tokens``), which a threshold then leaves out."""
    rule = QualityHeuristicsFilter(QualityConfig(word_lm=str(lm_path)))
    return signal_values(rule, "afm_word_perplexity", texts)


def choose_threshold(good: Sequence[float], keep: float = KEEP_TARGET) -> float:
    """The perplexity that keeps ``keep`` of ``good`` (rounded up to a whole number)."""
    return keep_threshold(good, keep, decimals=PERPLEXITY_DECIMALS)


def development_report(lm_path: str | Path, good: Sequence[KindText], web: Sequence[KindText],
                       boilerplate: dict[str, str], passes: Callable[[list[str]], list[bool]], *,
                       per_kind: int = 300, seed: int = 11, keep: float = KEEP_TARGET) -> dict[str, Any]:
    """The perplexity threshold chosen on the development good text the other stages keep,
    then the development junk made from the pages of ``web`` reported at it
    (:func:`~afm.filters.quality.audit.rule_development_report`)."""
    return rule_development_report(lambda texts: perplexities(lm_path, texts), good, web, boilerplate, passes,
                                   keep=keep, decimals=PERPLEXITY_DECIMALS,
                                   quantile_key="good_perplexity_quantiles", per_kind=per_kind, seed=seed)
