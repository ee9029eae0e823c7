"""The page rules recorded figures were measured with, kept once so each script reproduces
its table. ``FIGURES_RULE``: that of ``uncertain_fallback.py`` and ``block_word_features.py``,
the rule the block model shipped until the 2026-12-05 refit (fill >= 0.3, no lead rule,
trafilatura on pages with no kept word, headline dropped). ``SHIPPED_RULE``: below. The
shipped model's own rule is in its file's meta (``filters/data/extraction/blocks.json``)."""

from afm.filters.extraction.block_model import PageRule

FIGURES_RULE = PageRule(0.3, None, 1, True)

# The shipped file's rule since the 2026-12-05 refit (fill >= 0.3, no lead rule, trafilatura
# on pages with fewer than 20 kept words, headline dropped): the fixed setting of the
# 2026-12-06 first looks (``seed_ensemble.py``, ``fifth_source_first_look.py``,
# ``genre_features.py``).
SHIPPED_RULE = PageRule(0.3, None, 20, True)
