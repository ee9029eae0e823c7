"""The page rule the recorded figures of ``uncertain_fallback.py`` and
``block_word_features.py`` were measured with: the rule the block model shipped until the
2026-12-05 refit (fill >= 0.3, no lead rule, trafilatura on pages with no kept word,
headline dropped). Kept here once so both scripts reproduce their tables; the shipped
model's own rule is in its file's meta (``filters/data/extraction/blocks.json``)."""

from afm.filters.extraction.block_model import PageRule

FIGURES_RULE = PageRule(0.3, None, 1, True)
