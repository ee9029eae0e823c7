"""What the block model sees of each block: its text's shape, its markup, its surroundings.

One row per block of a :class:`~afm.filters.extraction.blocks.BlockTable`, computed
vectorised over the page (numpy; Python touches each block's text once, through C string
methods). The families are those of the published block classifiers (Kohlschütter's
boilerpipe shallow text features, Dragnet, Web2Text, Boilernet) and of Readability's
choice of a top container:

* the block's text: words, characters, link density, words per sentence mark, commas,
  whether it ends like a sentence, starts with a capital, holds a copyright sign or a
  separator bar;
* its markup: the kind of block (paragraph, heading level, list item, cell, code, quote,
  caption), its depth, and the ancestor counters of ``blocks.CONTEXT`` (navigation,
  header, footer, aside, form, article, main, list, table; class/id words); which of the
  boilerplate-like and content-like ancestors is nearest (``nearest_signals``); whether it
  sits where the article's paragraphs sit, or deeper inside their container, or is another
  kind of block than they are (``prose_parent_signals``);
* its place: position in the page (by blocks and by words), distance to the page's
  longest block;
* its surroundings: the text, link density and number of blocks of its container and of
  the container's container; whether it lies inside the *prose container* (the deepest
  block element holding 80% / 50% of the page's sentence-like text: Readability's top
  candidate, cheaply);
* its neighbours: the same text features of the blocks before and after it, and the
  words and link density of a window of five blocks.
"""

from __future__ import annotations

import numpy as np

from afm.filters.extraction.blocks import CONTEXT, KINDS, BlockTable, container_totals

# Which signal is nearest: a boilerplate name inside the article (a promo box, a caption, a
# reader-comment section set in the post) against an article inside a boilerplate-named
# wrapper; the counters of ``CONTEXT`` cannot tell the two apart (``nearest_signals``).
NEAREST_NAMES = ("neg_in_content", "meta_in_content", "comment_in_content", "content_in_neg",
                 "steps_to_neg", "steps_to_meta", "steps_to_content")
_NEG_SIGNALS = [CONTEXT.index(c) for c in ("nav", "aside", "footer", "form", "neg_class")]
_CONTENT_SIGNALS = [CONTEXT.index(c) for c in ("article", "main", "pos_class")]
_META, _COMMENT = CONTEXT.index("meta_class"), CONTEXT.index("comment_class")
MAX_STEPS = 10
# Where the article's paragraphs sit (``prose_parent_signals``): an article's paragraphs are
# siblings under one element (or one level of wrappers below it); a caption, a boxed promotion
# or a credit line set inside the article sits deeper, or is another kind of block.
PROSE_PARENT_NAMES = ("pp_share", "pp_member", "pp_inside", "pp_steps_off", "pp_kind_match")
MAX_OFF = 5

TEXT_NAMES = ("log_words", "log_chars", "link_density", "chars_per_word", "stops_per_word",
              "commas_per_word", "sentence_end", "capital_start", "copyright", "bars",
              "digits_share")
NAMES: tuple[str, ...] = (
    *TEXT_NAMES,
    *(f"kind_{k}" for k in KINDS), "depth", "depth_rel",
    *(f"ctx_{c}" for c in CONTEXT),
    "position", "word_position", "to_longest",
    "parent_log_words", "parent_link_density", "parent_log_blocks", "share_of_parent",
    "grand_log_words", "grand_link_density", "grand_log_blocks",
    "in_prose80", "in_prose50", "prose80_share", "page_log_words", "page_log_blocks",
    "words_vs_max", "before_prose", "after_prose", "title_overlap",
    *(f"prev_{n}" for n in TEXT_NAMES[:8]), *(f"next_{n}" for n in TEXT_NAMES[:8]),
    "prev_heading", "next_heading", "window_log_words", "window_link_density",
    *NEAREST_NAMES, *PROSE_PARENT_NAMES,
)
_HEADING_KINDS = [KINDS.index(k) for k in ("h1", "h2", "h3")]


# Character classes, one lookup table over the code points (beyond it: "other").
_OTHER, _SPACE, _STOP, _COMMA, _BAR, _COPY, _DIGIT, _COLON = range(8)
_LUT = np.zeros(0x10000, dtype=np.int64)
for _codes, _cls in (([9, 10, 11, 12, 13, 32, 160, 0x1680, *range(0x2000, 0x200C), 0x2028,
                       0x2029, 0x202F, 0x205F, 0x3000], _SPACE),
                     ([ord(c) for c in ".!?。！？"], _STOP), ([ord(c) for c in ",、，;；"], _COMMA),
                     ([124], _BAR), ([169], _COPY), (range(48, 58), _DIGIT), ([58], _COLON)):
    _LUT[list(_codes)] = _cls


def text_stats(texts: list[str]) -> np.ndarray:
    """(blocks, 9) counts: words, non-space characters, sentence marks, commas, sentence
    end, capital start, copyright signs, bars, digits. Vectorised over the page's
    characters (code points as one numpy array, classed by one table lookup; each block
    a run of it)."""
    n = len(texts)
    out = np.zeros((n, 9), dtype=np.float64)
    if n == 0:
        return out
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cls = _LUT[np.minimum(codes, len(_LUT) - 1)]
    cls[codes == 0xFEFF] = _SPACE
    block = np.repeat(np.arange(n), lengths)
    per = np.bincount(block * 8 + cls, minlength=8 * n).reshape(n, 8)
    space = cls == _SPACE
    begins = ~space
    begins[1:] &= space[:-1]
    starts = np.cumsum(lengths) - lengths
    nonempty = starts[lengths > 0]
    begins[nonempty] = ~space[nonempty]
    out[:, 0] = np.bincount(block[begins], minlength=n)
    out[:, 1] = lengths - per[:, _SPACE]
    out[:, 2] = per[:, _STOP]
    out[:, 3] = per[:, _COMMA]
    out[:, 6] = per[:, _COPY]
    out[:, 7] = per[:, _BAR]
    out[:, 8] = per[:, _DIGIT]
    # The first and last character of each block that ``str.strip`` keeps, by position.
    solid_at = np.flatnonzero(~_IS_PY_SPACE[np.minimum(codes, 0xFFFF)])
    if len(solid_at):
        first = np.searchsorted(solid_at, starts)
        last = np.searchsorted(solid_at, starts + lengths) - 1
        has = (first < len(solid_at)) & (last >= 0) & (last >= first)
        first_pos = solid_at[np.minimum(first, len(solid_at) - 1)]
        last_pos = solid_at[np.maximum(last, 0)]
        last_c = np.minimum(codes[last_pos], 0xFFFF)
        prev_c = np.minimum(codes[np.maximum(last_pos - 1, 0)], 0xFFFF)
        ends = _IS_END[last_c] | (_IS_QUOTE[last_c] & _IS_END[prev_c] & (last_pos > first_pos))
        out[:, 4] = has & ends
        first_c = codes[first_pos]
        upper = _IS_UPPER[np.minimum(first_c, 0xFFFF)]
        for j in np.flatnonzero(first_c > 0xFFFF).tolist():  # beyond the table: rare
            upper[j] = chr(int(first_c[j])).isupper()
        out[:, 5] = has & upper
    return out


_IS_END = np.zeros(0x10000, dtype=bool)
_IS_END[[ord(c) for c in ".!?:。！？"]] = True
_IS_QUOTE = np.zeros(0x10000, dtype=bool)
_IS_QUOTE[[ord(c) for c in "\"'”’)»"]] = True
_IS_PY_SPACE = np.array([chr(c).isspace() for c in range(0x10000)], dtype=bool)
_IS_UPPER = np.array([chr(c).isupper() for c in range(0x10000)], dtype=bool)


def _median(x: np.ndarray) -> float:
    """``np.median`` of a non-empty vector, without its overhead (a tenth of the cost)."""
    s = np.sort(x)
    k = len(s) // 2
    return float(s[k]) if len(s) % 2 else float((s[k - 1] + s[k]) / 2)


def title_overlap(texts: list[str], words: np.ndarray, title: str) -> np.ndarray:
    """Per block of at most 30 words: the share of its words found in the page's title (a
    headline repeats the title; 0 for longer blocks). The short blocks are lowered and split
    as one string, a lone NUL token between blocks (per block, the Python loop was a quarter
    of the features' time); a page whose text holds a NUL is read block by block."""
    out = np.zeros(len(texts))
    title_words = set(title.lower().split())
    if not title_words:
        return out
    short = np.flatnonzero((words > 0) & (words <= 30))
    if not len(short):
        return out
    chosen = [texts[i] for i in short.tolist()]
    joined = " \x00 ".join(chosen)
    if "\x00" in title or joined.count("\x00") != len(chosen) - 1:
        for i, text in zip(short.tolist(), chosen):
            mine = text.lower().split()
            out[i] = sum(map(title_words.__contains__, mine)) / len(mine) if mine else 0.0
        return out
    tokens = joined.lower().split()
    sep = np.fromiter(map("\x00".__eq__, tokens), dtype=bool, count=len(tokens))
    hit = np.fromiter(map(title_words.__contains__, tokens), dtype=np.float64, count=len(tokens))
    block = np.cumsum(sep)  # the block each token is in (a separator counts to the next)
    keep = ~sep
    n_words = np.bincount(block[keep], minlength=len(chosen))
    hits = np.bincount(block[keep], weights=hit[keep], minlength=len(chosen))
    out[short] = np.divide(hits, n_words, out=np.zeros(len(chosen)), where=n_words > 0)
    return out


def shift(x: np.ndarray, by: int, fill: float = 0.0) -> np.ndarray:
    """``x`` moved ``by`` rows down (negative: up) along the page's blocks, ``fill`` where
    nothing moved in: row i holds the block ``by`` before it (a neighbour's feature)."""
    out = np.full_like(x, fill)
    if by > 0:
        out[by:] = x[:-by]
    elif by < 0:
        out[:by] = x[-by:]
    else:
        out[:] = x
    return out


def prose_container(table: BlockTable, prose: np.ndarray, share: float) -> int:
    """The deepest container holding at least ``share`` of the page's prose words (-1:
    none, or no prose)."""
    totals = container_totals(table, prose)
    top = prose.sum()
    if top <= 0 or not len(totals):
        return -1
    ok = np.flatnonzero(totals >= share * top)
    if not len(ok):
        return -1
    return int(ok[np.argmax(table.el_depth[ok])])


def nearest_signals(table: BlockTable) -> np.ndarray:
    """(blocks, len(NEAREST_NAMES)): whether the innermost boilerplate-like (navigation,
    aside, footer, form or a negative class name), meta-like or comment-like ancestor lies
    at or below the innermost content-like one (``article``, ``main``, a positive class name), or
    the reverse; and how many levels up the nearest of each is (``MAX_STEPS``: none or far).
    Trafilatura prunes boilerplate-named subtrees inside the article it picked; this is the
    block model's view of the same cue."""
    near = table.nearest.astype(np.int64)
    neg = near[:, _NEG_SIGNALS].max(axis=1)
    content = near[:, _CONTENT_SIGNALS].max(axis=1)
    meta, comment = near[:, _META], near[:, _COMMENT]
    depth = table.depth.astype(np.int64)

    def steps(at: np.ndarray) -> np.ndarray:
        return np.where(at > 0, np.minimum(depth - at, MAX_STEPS), MAX_STEPS)

    # ">=": a negative word on the content element itself (BEM's ``article__related``,
    # ``story-promo``) names a part of the article, as a box below it does.
    return np.column_stack([(content > 0) & (neg >= content), (content > 0) & (meta >= content),
                            (content > 0) & (comment >= content), (neg > 0) & (content > neg),
                            steps(neg), steps(meta), steps(content)]).astype(np.float64)


def prose_parent_signals(table: BlockTable, prose: np.ndarray) -> np.ndarray:
    """(blocks, len(PROSE_PARENT_NAMES)): where each block sits against the article's own
    paragraphs. The *prose parent* is the element directly holding the most ``prose`` words
    (per block: its words where it reads as prose), at the blocks' containers (a ``<p>``'s
    is the paragraph itself; text runs split by inner blocks share a ``<div>``) or one level
    up (the element holding the paragraphs), whichever gathers the larger share. Per
    block: the page's prose share under it, whether the block sits as the paragraphs do
    (its container, or container's container, is the prose parent), whether it lies inside
    the prose parent but not so, how many levels deeper than the paragraphs its container is
    (-1..``MAX_OFF``; ``MAX_OFF`` + 1 outside), and whether its kind is the paragraphs' kind
    (by prose words). Readability and trafilatura keep a chosen container's paragraphs and
    prune what is nested in it; this is the block model's view of the same cue."""
    n = len(table)
    out = np.zeros((n, len(PROSE_PARENT_NAMES)))
    out[:, 3] = MAX_OFF + 1
    total = prose.sum()
    n_el = len(table.el_parent)
    if n == 0 or total <= 0 or n_el == 0:
        return out
    parent = table.parent.astype(np.int64)
    grand = np.where(parent >= 0, table.el_parent[np.maximum(parent, 0)], -1).astype(np.int64)
    best: tuple[int, np.ndarray, float, int] | None = None
    for level, above in ((1, parent), (2, grand)):
        ok = above >= 0
        direct = np.bincount(above[ok], weights=prose[ok], minlength=n_el)
        el = int(np.argmax(direct))
        share = float(direct[el] / total)
        if best is None or share > best[2] + 1e-9:
            best = (level, above, share, el)
    level, above, share, pp = best  # type: ignore[misc]
    if share <= 0:  # the prose lies in no element (text straight in the page): no parent
        return out
    member = above == pp
    idx = np.arange(n)
    inside = (idx >= table.el_first[pp]) & (idx < table.el_last[pp])
    parent_depth = np.where(parent >= 0, table.el_depth[np.maximum(parent, 0)], 0).astype(np.int64)
    off = parent_depth - int(table.el_depth[pp]) - (level - 1)
    kinds = table.kind.astype(np.int64)
    main_kind = int(np.argmax(np.bincount(kinds[member], weights=prose[member], minlength=len(KINDS))))
    out[:, 0] = share
    out[:, 1] = member
    out[:, 2] = inside & ~member
    out[:, 3] = np.where(inside, np.clip(off, -1, MAX_OFF), MAX_OFF + 1)
    out[:, 4] = kinds == main_kind
    return out


def features(table: BlockTable) -> np.ndarray:
    """(blocks, len(NAMES)) float32 feature matrix of one page."""
    n = len(table)
    if n == 0:
        return np.zeros((0, len(NAMES)), dtype=np.float32)
    st = text_stats(table.texts)
    words, chars = st[:, 0], np.maximum(st[:, 1], 1.0)
    links = np.minimum(table.link_chars, chars)
    link_density = links / chars
    w1 = np.maximum(words, 1.0)
    text = np.column_stack([
        np.log1p(words), np.log1p(chars), link_density, np.minimum(chars / w1, 30.0),
        np.minimum(st[:, 2] / w1, 2.0), np.minimum(st[:, 3] / w1, 2.0), st[:, 4], st[:, 5],
        st[:, 6], np.minimum(st[:, 7], 5.0), st[:, 8] / chars,
    ])
    kind = np.zeros((n, len(KINDS)))
    kind[np.arange(n), table.kind] = 1.0
    depth = table.depth.astype(np.float64)
    ctx = np.minimum(table.context, 3).astype(np.float64)
    idx = np.arange(n, dtype=np.float64)
    total_words = max(words.sum(), 1.0)
    longest = int(np.argmax(words))
    position = np.column_stack([idx / max(n - 1, 1), (np.cumsum(words) - words) / total_words,
                                (idx - longest) / max(n - 1, 1)])

    # Containers: totals under each, then the block's container and its container.
    el_words, el_links, el_chars = container_totals(
        table, np.column_stack([words, links, chars])).T if len(table.el_first) else (
        np.zeros(0), np.zeros(0), np.zeros(0))
    el_blocks = (table.el_last - table.el_first).astype(np.float64)

    def around(el: np.ndarray) -> np.ndarray:
        ok = el >= 0
        e = np.where(ok, el, 0)
        if not len(el_words):
            return np.zeros((n, 3))
        return np.column_stack([np.where(ok, np.log1p(el_words[e]), np.log1p(total_words)),
                                np.where(ok, el_links[e] / np.maximum(el_chars[e], 1.0),
                                         links.sum() / chars.sum()),
                                np.where(ok, np.log1p(el_blocks[e]), np.log1p(n))])

    parent = table.parent
    grand = np.where(parent >= 0, table.el_parent[np.maximum(parent, 0)], -1) \
        if len(table.el_parent) else parent
    p_stats, g_stats = around(parent), around(grand)
    share = words / np.maximum(np.expm1(p_stats[:, 0]), 1.0)

    prose = np.where((words >= 10) & (link_density < 0.3) & (st[:, 2] > 0), words, 0.0)
    inside = []
    before = after = np.zeros(n)
    for frac in (0.8, 0.5):
        el = prose_container(table, prose, frac)
        if el < 0:
            inside.append(np.zeros(n))
            continue
        first, last = table.el_first[el], table.el_last[el]
        inside.append(((idx >= first) & (idx < last)).astype(float))
        if frac == 0.8:  # blocks between the container's edge and this one, by page share
            before = np.maximum(first - idx, 0) / n
            after = np.maximum(idx - last + 1, 0) / n
    in80 = inside[0]
    prose80 = (prose * in80).sum() / max(prose.sum(), 1.0)
    page = np.column_stack([in80, inside[1], np.full(n, prose80), np.full(n, np.log1p(total_words)),
                            np.full(n, np.log1p(n)), words / max(words.max(), 1.0), before, after,
                            title_overlap(table.texts, words, table.title)])

    heading = kind[:, _HEADING_KINDS].sum(axis=1)
    near = np.column_stack([text[:, :8], heading])
    nb = np.column_stack([shift(near[:, :8], 1), shift(near[:, :8], -1),
                          shift(near[:, 8], 1), shift(near[:, 8], -1)])
    cw = np.concatenate([[0.0], np.cumsum(words)])
    cl = np.concatenate([[0.0], np.cumsum(links)])
    cc = np.concatenate([[0.0], np.cumsum(chars)])
    lo, hi = np.maximum(np.arange(n) - 2, 0), np.minimum(np.arange(n) + 3, n)
    window = np.column_stack([np.log1p(cw[hi] - cw[lo]), (cl[hi] - cl[lo]) / np.maximum(cc[hi] - cc[lo], 1.0)])
    x = np.column_stack([text, kind, depth, depth - _median(depth), ctx, position,
                         p_stats, share, g_stats, page, nb, window, nearest_signals(table),
                         prose_parent_signals(table, prose)])
    return x.astype(np.float32)


CONTEXT_NAMES = ("p", "p_prev", "p_next", "p_prev2", "p_next2", "p_window3", "p_window10",
                 "p_parent", "p_grand", "p_page", "p_max", "p_in_prose80", "log_words",
                 "link_density", "kind_heading", "kind_li", "position")


def context_features(table: BlockTable, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The second stage's view of each block: the first stage's probability ``p`` of it,
    of its neighbours, of a window around it and of its containers (word-weighted means),
    and of the page; with a few of its own features (``x``: :func:`features`' rows)."""
    n = len(table)
    if n == 0:
        return np.zeros((0, len(CONTEXT_NAMES)), dtype=np.float32)
    col = {name: j for j, name in enumerate(NAMES)}
    words = np.expm1(x[:, col["log_words"]].astype(np.float64))
    w = np.maximum(words, 1.0)
    pw = np.concatenate([[0.0], np.cumsum(p * w)])
    cw = np.concatenate([[0.0], np.cumsum(w)])
    idx = np.arange(n)

    def window(k: int) -> np.ndarray:
        lo, hi = np.maximum(idx - k, 0), np.minimum(idx + k + 1, n)
        return (pw[hi] - pw[lo]) / (cw[hi] - cw[lo])

    if len(table.el_first):
        el = (pw[table.el_last] - pw[table.el_first]) / np.maximum(
            cw[table.el_last] - cw[table.el_first], 1.0)
        parent = table.parent
        grand = np.where(parent >= 0, table.el_parent[np.maximum(parent, 0)], -1)
        page_mean = pw[-1] / cw[-1]
        p_parent = np.where(parent >= 0, el[np.maximum(parent, 0)], page_mean)
        p_grand = np.where(grand >= 0, el[np.maximum(grand, 0)], page_mean)
    else:
        page_mean = pw[-1] / cw[-1]
        p_parent = p_grand = np.full(n, page_mean)
    in80 = x[:, col["in_prose80"]]
    prose_p = (p * w * in80).sum() / max((w * in80).sum(), 1.0)
    heading = x[:, [col["kind_h1"], col["kind_h2"], col["kind_h3"]]].sum(axis=1)
    out = np.column_stack([
        p, shift(p, 1, -1.0), shift(p, -1, -1.0), shift(p, 2, -1.0), shift(p, -2, -1.0),
        window(3), window(10), p_parent, p_grand, np.full(n, page_mean), np.full(n, p.max()),
        np.full(n, prose_p), x[:, col["log_words"]], x[:, col["link_density"]], heading,
        x[:, col["kind_li"]], x[:, col["position"]],
    ])
    return out.astype(np.float32)
