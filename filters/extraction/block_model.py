"""The block extractor: lexbor's DOM cut into blocks, each kept or dropped by a small
learned model, the kept ones written out as text.

A page goes: decoded HTML -> :func:`~afm.filters.extraction.blocks.page_blocks` (one walk
over lexbor's tree) -> :func:`~afm.filters.extraction.block_features.features` (numpy, one
row per block) -> gradient-boosted trees (:class:`Forest`: every tree evaluated at once,
one numpy gather per tree level) -> the blocks whose probability of being main content is
at least ``threshold``, adjusted per page by the model's :class:`PageRule` (a dropped block
between kept ones kept back, lines before the first prose dropped, and a page with too few
kept words handed to a fallback extractor) -> text (:func:`render`: one paragraph a line,
list items as ``- item``, a table row's cells as ``| a | b |``, code blocks with their line
breaks).

The model file (``data/extraction/blocks.json``, made by ``afm extraction blocks train``,
see that folder's README) is plain JSON: feature names, the trees as arrays, the
threshold and how it was chosen, so extraction needs numpy and selectolax only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from afm.errors import UserError
from afm.filters.extraction.block_features import CONTEXT_NAMES, NAMES, context_features, features
from afm.filters.extraction.block_sequence import SequenceNets, mixed
from afm.filters.extraction.blocks import CONTEXT, KINDS, BlockTable, page_blocks
from afm.filters.extraction.trees import Forest

MODEL_PATH = Path(__file__).resolve().parent.parent / "data" / "extraction" / "blocks.json"
FORMAT = "afm-extraction-blocks/1"
# Block texts are already visible text (``filters.invisible``): no zero-width space or BOM
# is left to fold.
_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u2028\u2029]+")
_LI, _TD, _H1 = KINDS.index("li"), KINDS.index("td"), KINDS.index("h1")
_TOKEN = re.compile(r"\w+")
_COMMENT_CONTEXT = CONTEXT.index("comment_class")
HEADLINE_BODY_WORDS = 20  # ``PageRule.drop_headline``: a headline comes before a block this long
FILL_SPAN = 4  # a filled block's nearest kept neighbours are at most this many blocks apart
# The extractors a page rule may hand a page to (``PageRule.fallback_to``), by their names
# in the block records' baselines and the extract stage.
FALLBACK_EXTRACTORS = ("trafilatura", "resiliparse")


@dataclass(frozen=True)
class PageRule:
    """What the page decides beyond each block's own threshold (chosen with it, by source,
    in ``block_train.choose``; every field None: the threshold alone).

    * ``fill_below``: a dropped block whose probability is at least this is kept when the
      nearest kept blocks before and after it are at most ``FILL_SPAN`` blocks apart (a
      caption, a short list item or a one-line paragraph inside kept text);
    * ``lead_words``: kept blocks before the first kept block of at least this many words
      are dropped (a headline, a byline, a date line above the text);
    * ``fallback_words``: a page whose kept text has fewer words (``\\w+`` tokens) than this
      is handed to the fallback extractor: the pages where the model found no main text are
      the ones where it is most often wrong;
    * ``fallback_to``: that extractor, one of ``FALLBACK_EXTRACTORS``: ``trafilatura``
      (defaults, no comments; ~5.5x a block page's cost) or ``resiliparse`` (its
      main-content text; under half a block page's cost), so the choice scores the text
      the extract stage will run (files without the field: trafilatura);
    * ``drop_headline``: kept ``h1`` blocks before the first kept block of
      ``HEADLINE_BODY_WORDS`` words are dropped: the page's headline, which the record
      carries apart as its title (trafilatura's convention too; gold sets differ on it);
    * ``comment_words``: on a page that declares itself an article (``BlockTable.genre``),
      the blocks under a comment section (``comment_class`` context) are dropped when the
      other kept blocks hold at least this many words: reader comments are not the
      article's text (trafilatura's ``include_comments=False``), while a forum's replies,
      under the same class names, are the page's.
    """

    fill_below: float | None = None
    lead_words: int | None = None
    fallback_words: int | None = None
    drop_headline: bool = False
    comment_words: int | None = None
    fallback_to: str = "trafilatura"

    def __post_init__(self) -> None:
        if self.fallback_to not in FALLBACK_EXTRACTORS:
            raise UserError(f"page rule: fallback extractor {self.fallback_to!r}: use one of "
                            f"{', '.join(FALLBACK_EXTRACTORS)}")

    def to_json(self) -> dict[str, Any]:
        return {"fill_below": self.fill_below, "lead_words": self.lead_words,
                "fallback_words": self.fallback_words, "drop_headline": self.drop_headline,
                "comment_words": self.comment_words, "fallback_to": self.fallback_to}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PageRule:
        data = data or {}
        return cls(data.get("fill_below"), data.get("lead_words"), data.get("fallback_words"),
                   bool(data.get("drop_headline", False)), data.get("comment_words"),
                   str(data.get("fallback_to") or "trafilatura"))

    def adjust(self, table: BlockTable, p: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """``keep`` (blocks at or above the threshold) with the fill, lead, headline and
        comment rules applied (the fallback is decided on the text: ``falls_back``)."""
        n = len(keep)
        if n == 0:
            return keep
        if self.fill_below is not None:
            keep = fill_gaps(keep, p, self.fill_below)
        if self.lead_words is not None:
            first = first_long_block(table, keep, self.lead_words)
            if first is not None:
                keep = keep.copy()
                keep[:first] = False
        if self.drop_headline:
            keep = drop_headline(table, keep)
        if self.comment_words is not None and table.genre == "article":
            keep = drop_comments(table, keep, self.comment_words)
        return keep

    def falls_back(self, text: str) -> bool:
        """Whether the page's kept text is too short to trust (see ``fallback_words``)."""
        if self.fallback_words is None:
            return False
        count = 0
        for _ in _TOKEN.finditer(text):
            count += 1
            if count >= self.fallback_words:
                return False
        return True


def drop_comments(table: BlockTable, keep: np.ndarray, words: int) -> np.ndarray:
    """``keep`` less the blocks under a comment section, when the kept blocks outside
    comment sections hold at least ``words`` ``\\w+`` words (else the page's text may be
    under a comment-named container, and is left as it is)."""
    comment = table.context[:, _COMMENT_CONTEXT] > 0
    if not (keep & comment).any():
        return keep
    outside = 0
    for i in np.flatnonzero(keep & ~comment).tolist():
        outside += len(_TOKEN.findall(table.texts[i]))
        if outside >= words:
            return keep & ~comment
    return keep


def drop_headline(table: BlockTable, keep: np.ndarray, body_words: int = HEADLINE_BODY_WORDS
                  ) -> np.ndarray:
    """``keep`` without the kept ``h1`` blocks that come before the first kept block of at
    least ``body_words`` words (all of them on a page without such a block)."""
    head = (table.kind == _H1) & keep
    if not head.any():
        return keep
    first = first_long_block(table, keep, body_words)
    if first is not None:
        head[first:] = False
    return keep & ~head


def first_long_block(table: BlockTable, keep: np.ndarray, words: int) -> int | None:
    """The first kept block of at least ``words`` ``\\w+`` tokens (None: no such block);
    what the page's text starts with, for the lead and headline rules."""
    for i in np.flatnonzero(keep).tolist():
        if len(_TOKEN.findall(table.texts[i])) >= words:
            return i
    return None


def fill_gaps(keep: np.ndarray, p: np.ndarray, low: float, span: int = FILL_SPAN) -> np.ndarray:
    """``keep`` plus every dropped block with ``p >= low`` whose nearest kept blocks on both
    sides are at most ``span`` blocks apart (vectorised: the last kept block at or before
    each block and the first at or after it)."""
    n = len(keep)
    idx = np.arange(n)
    before = np.maximum.accumulate(np.where(keep, idx, -1))
    after = np.minimum.accumulate(np.where(keep, idx, n)[::-1])[::-1]
    return keep | ((p >= low) & (before >= 0) & (after < n) & (after - before <= span))


@dataclass
class BlockModel:
    """The block extractor's learned part: the first stage's trees (a block's own
    features), optionally the second stage's (the first stage's probabilities around the
    block: ``block_features.context_features``) or sequence nets over the page's blocks
    (``block_sequence``: their mean probability and the trees' are averaged), and the keep
    threshold."""

    forest: Forest
    threshold: float
    names: tuple[str, ...] = NAMES
    meta: dict[str, Any] = field(default_factory=dict)
    context: Forest | None = None
    rule: PageRule = field(default_factory=PageRule)
    sequence: SequenceNets | None = None
    columns: np.ndarray | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        # A file fitted before newer feature columns were added reads its own columns, by
        # name, from today's rows (the feature list only grows; ``load`` checks the names).
        self.columns = None if self.names == NAMES else np.array([NAMES.index(n) for n in self.names])

    def own_columns(self, x: np.ndarray) -> np.ndarray:
        """``features``' rows cut to the columns this model was fitted on, in its order."""
        return x if self.columns is None else x[:, self.columns]

    def probability(self, table: BlockTable) -> np.ndarray:
        """Per block: the probability of being main content."""
        if len(table) == 0:
            return np.zeros(0)
        x = features(table)
        own = self.own_columns(x)
        p = self.forest.probability(own)
        if self.context is not None:
            p = self.context.probability(context_features(table, x, p))
        if self.sequence is not None:
            p = mixed(p, self.sequence.probability(own))
        return p

    def keep(self, table: BlockTable) -> np.ndarray:
        """Per block: kept as main content (the threshold, then the page rule's fill, lead
        and headline rules)."""
        p = self.probability(table)
        return self.rule.adjust(table, p, p >= self.threshold)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "features": list(self.names), "threshold": self.threshold,
                "forest": self.forest.to_json(),
                "context_features": list(CONTEXT_NAMES) if self.context else None,
                "context": self.context.to_json() if self.context else None,
                "page_rule": self.rule.to_json(),
                "sequence": self.sequence.to_json() if self.sequence else None, "meta": self.meta}
        path.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> BlockModel:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read the block extraction model ({exc})") from exc
        if data.get("format") != FORMAT:
            raise UserError(f"{path}: not a block extraction model ({FORMAT})")
        names = tuple(data["features"])
        if not set(names) <= set(NAMES) or len(set(names)) != len(names) or (
                data.get("context") and tuple(data.get("context_features") or ()) != CONTEXT_NAMES):
            raise UserError(f"{path}: made for other block features; retrain it with "
                            "`afm extraction blocks train`")
        context = Forest.from_json(data["context"]) if data.get("context") else None
        sequence = SequenceNets.from_json(data["sequence"]) if data.get("sequence") else None
        forest = Forest.from_json(data["forest"])
        if int(forest.feature.max(initial=0)) >= len(names) or (
                sequence is not None and sequence.w_in.shape[1] != len(names)):
            raise UserError(f"{path}: its trees or nets read other columns than its {len(names)} "
                            "named features; retrain it with `afm extraction blocks train`")
        return cls(forest, float(data["threshold"]), names, dict(data.get("meta") or {}), context,
                   PageRule.from_json(data.get("page_rule")), sequence)


@lru_cache(maxsize=4)
def load_block_model(path: str = str(MODEL_PATH)) -> BlockModel:
    """The model at ``path`` (the shipped one by default), loaded once per process."""
    return BlockModel.load(Path(path))


def fold(text: str, pre: bool) -> str:
    """A block's text as output: whitespace folded inside lines (``pre``: kept), empty
    lines dropped."""
    if pre:
        return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))
    return "\n".join(s for s in (_SPACES.sub(" ", line).strip() for line in text.split("\n")) if s)


def render(table: BlockTable, keep: np.ndarray) -> str:
    """The kept blocks as text: a line per paragraph, heading and code line; ``- `` before
    a list item; the cells of one table row on one line between ``|``."""
    lines: list[str] = []
    row = -2
    for i in np.flatnonzero(keep).tolist():
        text = fold(table.texts[i], bool(table.pre[i]))
        if not text:
            continue
        kind = int(table.kind[i])
        if kind == _TD:
            parent = int(table.parent[i])
            this_row = int(table.el_parent[parent]) if parent >= 0 else -1
            cell = text.replace("\n", " ")
            if this_row == row and lines:
                lines[-1] = f"{lines[-1]} {cell} |"
            else:
                lines.append(f"| {cell} |")
            row = this_row
            continue
        row = -2
        lines.append(f"- {text}" if kind == _LI else text)
    return "\n".join(lines)


def extract_blocks(model: BlockModel, html: str, fallback: Callable[[str], str] | None = None
                   ) -> tuple[str, dict[str, float]]:
    """The main text of a decoded page, and signals: blocks seen and kept, and whether the
    page went to ``fallback`` (an extractor of the whole page, called when the model's
    page rule finds too few kept words; None: the blocks' text as it is)."""
    table = page_blocks(html)
    keep = model.keep(table)
    text = render(table, keep)
    signals = {"blocks": float(len(table)), "blocks_kept": float(keep.sum()), "fallback": 0.0}
    if fallback is not None and model.rule.falls_back(text):
        signals["fallback"] = 1.0
        return fallback(html), signals
    return text, signals
