"""How the shipped context-gain model (``quality.context_gain_model: builtin``) is made, and
how the threshold of its rule is chosen, without looking at any set it is reported on.

* **Text**: the human-made main texts of WCXB's pages (both its splits, article, forum,
  documentation and service pages; CC-BY-4.0) and this machine's package docs, READMEs and
  manual pages, split by a seeded hash of their site or document: 70% train the model, the
  other 30% choose the threshold (:func:`~afm.filters.quality.defaults.development_split`,
  the chrome model's split too).
* **The model**: the vocabulary (:func:`~afm.filters.quality.context_gain.build_vocabulary`)
  and the token rows of the training texts (:func:`token_rows`) come from here; the app's
  ``afm quality train-context-gain`` writes them as shards and has the one trainer train the
  ``context-gain`` stage on them (training sits above this layer), and the run's weights
  become the ``.npz`` the rule reads.
* **The threshold** (``quality.min_context_gain``): the gain that keeps :data:`KEEP_TARGET`
  of the development good text the other document stages keep, fixed before any junk is
  scored; the development junk (every kind, made from the held-out sites' pages) is then
  reported at it, never used to move it. Held-out figures are in docs/quality.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from afm.filters.quality.audit import keep_threshold, rule_development_report, signal_values
from afm.filters.quality.context_gain import encode
from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter
from afm.filters.quality.texts import KindText

KEEP_TARGET = 0.98  # share of development good text (that the other stages keep) the threshold keeps
GAIN_DECIMALS = 3  # the threshold rounded down to 0.001 nats a token
REJECTS_BELOW = True  # the rule rejects a gain below its threshold (too little gain from context)


def token_rows(texts: Sequence[KindText], vocabulary: Sequence[str]) -> list[dict[str, Any]]:
    """``{"id", "source", "tokens"}`` rows of token shards: each text's word ids (the
    trainer's loader closes each with EOS)."""
    index = {w: i for i, w in enumerate(vocabulary)}
    return [{"id": t.id, "source": "web", "tokens": encode(t.text, index).tolist()} for t in texts if t.text.strip()]


def gains(model_path: str | Path, texts: Sequence[str]) -> list[float]:
    """Each text's ``afm_context_gain`` as the quality rule computes it (on the prose
    lines; the texts' language is not given, so none is left out for it); NaN for a text
    under 65 tokens of prose, which the rule does not judge: it then neither fails it nor
    is rejected by it."""
    rule = QualityHeuristicsFilter(QualityConfig(context_gain_model=str(model_path)))
    return signal_values(rule, "afm_context_gain", texts)


def choose_threshold(good: Sequence[float], keep: float = KEEP_TARGET) -> float:
    """The gain that keeps ``keep`` of the judged ``good`` values (NaN: not judged), rounded
    down to 0.001 nats."""
    return keep_threshold(good, keep, decimals=GAIN_DECIMALS, reject_below=REJECTS_BELOW)


def development_report(model_path: str | Path, good: Sequence[KindText], web: Sequence[KindText],
                       boilerplate: dict[str, str], passes: Callable[[list[str]], list[bool]], *,
                       per_kind: int = 300, seed: int = 11, keep: float = KEEP_TARGET) -> dict[str, Any]:
    """The threshold chosen on the development good text the other stages keep, then the
    development junk made from the pages of ``web`` reported at it
    (:func:`~afm.filters.quality.audit.rule_development_report`; the rule rejects below it)."""
    return rule_development_report(lambda texts: gains(model_path, texts), good, web, boilerplate, passes,
                                   keep=keep, decimals=GAIN_DECIMALS, reject_below=REJECTS_BELOW,
                                   quantile_key="good_gain_quantiles", per_kind=per_kind, seed=seed, ndigits=3,
                                   quantiles=(0.01, 0.02, 0.05, 0.5))
