"""Benchmark n-gram matching: one normalisation, vectorised 64-bit n-gram hashing, and a
compact sorted index that memory-maps.

Why this shape:

* **One normalisation** for benchmarks and documents, used for matching only (documents are
  never modified): Unicode NFKC, lower-case, invisible format characters removed, every
  punctuation, symbol, control and space character turned into a token boundary. A token is
  a maximal run of the remaining characters (letters, digits, marks), so ``Janet's`` ==
  ``janet’s`` == ``JANET S``, and line breaks or changed punctuation do not hide a copy.
  Scripts written without spaces (Chinese, Japanese, Thai) become long tokens; matching still
  works on exact copies but not on fragments of such text.
* **Hashing in numpy**, not per token in Python: a batch of documents is turned into one
  array of code points; every token hash comes from one prefix sum over it (a polynomial
  over the token's code points), n-gram hashes are a polynomial over token hashes, and
  everything is mixed with the splitmix64 finaliser.
* **The index** is, per n, three parallel arrays sorted by hash (``uint64`` hash, benchmark
  number, example number) saved as ``.npy`` so ``np.load(mmap_mode="r")`` maps them without
  reading them (shared by every worker process through the page cache): 14 bytes per
  n-gram, plus a bitmap of the 4-gram each indexed n-gram starts with (2-4 bytes per
  n-gram). A document is hashed once at n = 4 and checked against that bitmap; only the
  few positions that pass are hashed at each n present (at most 10, n in 4..13) and
  binary-searched, so the scan costs about one pass over the text however many benchmarks
  and distinct n the index holds.
"""

from __future__ import annotations

import functools
import json
import sys
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from afm.filters.invisible import INVISIBLE, INVISIBLE_PATTERN

INDEX_FORMAT = "afm-ngram-index"
INDEX_VERSION = 2  # 2: adds the prefix filter
HASH_NAME = "poly-cp64-splitmix-v1"  # changes whenever hashing changes: old indexes refuse to load
MIN_N, MAX_N = 4, 13

# Odd 64-bit multipliers (from the golden ratio and splitmix64); any odd constants work.
_CHAR_BASE = np.uint64(0x9E3779B97F4A7C15)
_NGRAM_BASE = np.uint64(0xD6E8FEB86659FD93)
_LEN_SALT = np.uint64(0xC2B2AE3D27D4EB4F)
_N_SALT = np.uint64(0x165667B19E3779F9)
_N_SALTS = np.arange(64, dtype=np.uint64) * _N_SALT  # one salt per n (array op: no overflow warning)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

_ASCII_SEPARATORS = bytes(
    c for c in range(128) if not chr(c).isalnum()
)  # every ASCII punctuation, symbol, control and space character
_ASCII_TABLE = bytes.maketrans(_ASCII_SEPARATORS, b" " * len(_ASCII_SEPARATORS))


@functools.cache
def separator_table() -> np.ndarray:
    """Boolean table over all code points: True where the character ends a token.

    Punctuation (P*), symbols (S*), separators (Z*), controls (Cc) and anything Python
    calls whitespace. Only planes 0-1 hold such characters, so only they are scanned."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for cp in range(0x20000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat[0] in "PSZ" or cat == "Cc" or ch.isspace():
            table[cp] = True
    return table


def prepare(text: str) -> str:
    """NFKC + lower-case + invisible characters removed: the string tokens are cut from."""
    if text.isascii():
        return text.lower()
    return INVISIBLE_PATTERN.sub("", unicodedata.normalize("NFKC", text)).lower()


def normalize_text(text: str) -> str:
    """The matching form of ``text``: its tokens joined by single spaces."""
    prepared = prepare(text)
    if prepared.isascii():
        return " ".join(prepared.encode("ascii").translate(_ASCII_TABLE).decode("ascii").split())
    cps = np.frombuffer(prepared.encode("utf-32-le"), dtype=np.uint32).copy()
    cps[separator_table()[cps]] = 32
    return " ".join(cps.tobytes().decode("utf-32-le").split())


def tokenize(text: str) -> list[str]:
    """Matching tokens of ``text`` (see :func:`normalize_text`)."""
    norm = normalize_text(text)
    return norm.split(" ") if norm else []


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, in place on a uint64 array (spreads every input bit)."""
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


_CHAR_BASE_INV = np.uint64(pow(int(_CHAR_BASE), -1, 1 << 64))
_WORD, _SEP, _INVISIBLE_CLASS = 0, 1, 2


@functools.cache
def _class_table() -> np.ndarray:
    """Per code point: 0 = part of a token, 1 = token boundary, 2 = invisible (removed)."""
    table = separator_table().astype(np.uint8)
    for ch in INVISIBLE:
        table[ord(ch)] = _INVISIBLE_CLASS
    return table


_ASCII_CLASS = np.frombuffer(
    bytes(_SEP if c in _ASCII_SEPARATORS else _WORD for c in range(256)), dtype=np.uint8
)


class _Powers:
    """B**k and B**-k mod 2**64 for k < size, grown by doubling as batches need."""

    def __init__(self) -> None:
        self.fwd = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def get(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        if size > self.fwd.size:
            cap = max(1 << max(16, (size - 1).bit_length()), size)
            for name, base in (("fwd", _CHAR_BASE), ("inv", _CHAR_BASE_INV)):
                arr = np.empty(cap, dtype=np.uint64)
                arr[0] = 1
                arr[1:] = base
                np.multiply.accumulate(arr, out=arr)  # wraps mod 2**64, as intended
                setattr(self, name, arr)
        return self.fwd[:size], self.inv[:size]


_POWERS = _Powers()


@dataclass
class TokenBatch:
    """Tokens of a batch of texts, as arrays over their concatenated code points.

    ``hashes[i]`` is token i's 64-bit hash, ``doc[i]`` the text it came from, and
    ``starts``/``ends`` its span in ``chars`` (the prepared texts joined by a space), so
    an n-gram's text can be cut out again for reports."""

    hashes: np.ndarray  # uint64[T]
    doc: np.ndarray  # int64[T]
    starts: np.ndarray  # int64[T]
    ends: np.ndarray  # int64[T]
    chars: np.ndarray  # uint8 (all ASCII) or uint32 code points
    num_docs: int

    def token_text(self, i: int) -> str:
        piece = self.chars[self.starts[i] : self.ends[i]]
        return piece.tobytes().decode("ascii" if piece.dtype == np.uint8 else "utf-32-le")

    def ngram_text(self, token: int, n: int) -> str:
        """The normalised text of the n-gram starting at token index ``token``."""
        return " ".join(self.token_text(i) for i in range(token, token + n))

    def doc_token_counts(self) -> np.ndarray:
        return np.bincount(self.doc, minlength=self.num_docs)


def _nfkc_lower(text: str) -> str:
    return text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).lower()


def hash_tokens(texts: Sequence[str]) -> TokenBatch:
    """Tokenise and hash a batch of texts in a few vector operations.

    A token's hash is sum((c_j + 1) * B**j) over its code points c_j (j from 0 at its
    first character), mod 2**64, salted with its length and mixed. It is computed for all
    tokens at once from one prefix sum: H = cumsum((c + 1) * B**position), and the token
    spanning [s, e) is (H[e] - H[s]) * B**-s."""
    prepared = [_nfkc_lower(t) for t in texts]
    joined = " ".join(prepared)
    num = len(prepared)
    lengths = np.fromiter((len(p) for p in prepared), dtype=np.int64, count=num)
    doc_starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])) if num else lengths
    if joined.isascii():
        cps = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        cls = _ASCII_CLASS[cps]
    else:
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        cls = _class_table()[cps]
        invisible = cls == _INVISIBLE_CLASS
        if invisible.any():
            removed_before = np.concatenate(([0], np.cumsum(invisible)))
            doc_starts = doc_starts - removed_before[doc_starts]
            cps, cls = cps[~invisible], cls[~invisible]
    word = cls == _WORD
    edges = np.diff(word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    if starts.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return TokenBatch(np.zeros(0, np.uint64), empty, empty, empty, cps, num)
    if cps.size <= _SPAN:
        hashes = _span_token_hashes(cps, word, starts, ends)
    else:  # long batch or text: spans of whole tokens, so the power tables stay small
        hashes = np.empty(starts.size, dtype=np.uint64)
        group = starts // _SPAN
        cuts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), starts.size]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            base, top = int(starts[lo]), int(ends[hi - 1])
            hashes[lo:hi] = _span_token_hashes(
                cps[base:top], word[base:top], starts[lo:hi] - base, ends[lo:hi] - base
            )
    doc = np.searchsorted(doc_starts, starts, side="right") - 1
    return TokenBatch(hashes, doc, starts, ends, cps, num)


_SPAN = 1 << 20  # code points hashed with one prefix sum (power tables: 16 bytes each)


def _span_token_hashes(
    cps: np.ndarray, word: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    fwd, inv = _POWERS.get(cps.size)
    contrib = cps.astype(np.uint64)
    contrib += np.uint64(1)
    contrib *= word  # separators add nothing
    contrib *= fwd
    prefix = np.empty(cps.size + 1, dtype=np.uint64)
    prefix[0] = 0
    np.cumsum(contrib, out=prefix[1:])
    hashes = prefix[ends] - prefix[starts]
    hashes *= inv[starts]
    hashes ^= (ends - starts).astype(np.uint64) * _LEN_SALT
    return _mix64(hashes)


def ngram_hashes_by_n(
    batch: TokenBatch, sizes: Sequence[int], within_docs: bool = True
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For each n in ``sizes``: (n-gram hashes, start token index), built incrementally,
    one multiply-add per extra token. With ``within_docs`` (the default) only n-grams lying
    inside one text are returned; without it every window of the batch is, and the caller
    drops the few it keeps that span two texts (cheaper when most are discarded anyway)."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    wanted = sorted(set(sizes))
    t = batch.hashes.size
    if not wanted:
        return out
    acc = batch.hashes.copy()
    for n in range(1, wanted[-1] + 1):
        m = t - n + 1
        if m <= 0:
            break
        if n > 1:
            acc = acc[:m] * _NGRAM_BASE + batch.hashes[n - 1 : n - 1 + m]
        if n in wanted:
            if within_docs:
                starts = np.flatnonzero(batch.doc[:m] == batch.doc[n - 1 :])
                h = acc[starts] ^ _N_SALTS[n]
            else:
                starts = np.arange(m)
                h = acc ^ _N_SALTS[n]
            out[n] = (_mix64(h), starts)
    for n in wanted:
        out.setdefault(n, (np.zeros(0, np.uint64), np.zeros(0, np.int64)))
    return out


def window_hashes(token_hashes: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """The n-gram hashes starting at token positions ``starts`` only: the same values as
    :func:`ngram_hashes_by_n`, for the few candidate positions a filter let through."""
    acc = token_hashes[starts]
    for k in range(1, n):
        acc = acc * _NGRAM_BASE + token_hashes[starts + k]
    acc ^= _N_SALTS[n]
    return _mix64(acc)


def ngram_hashes(texts: Sequence[str], n: int) -> np.ndarray:
    """All n-gram hashes of ``texts`` (convenience for tests and the index builder)."""
    return ngram_hashes_by_n(hash_tokens(texts), [n])[n][0]


# --------------------------------------------------------------------------- the index


def filter_bits(num: int) -> int:
    """Bits of the prefix filter for ``num`` n-grams: 16 to 32 bits per n-gram, so a
    random document n-gram passes it with probability <= 1/16 (at most 2**32 bits)."""
    return int(min(max(int(num).bit_length() + 4, 16), 32))


def build_filter(hashes: np.ndarray, bits: int) -> np.ndarray:
    """A bitmap over the top ``bits`` bits of the hashes (packed, little bit order).

    Most document n-grams are rejected by one lookup in this small array (which stays in
    the CPU cache), so only a few reach the binary search of the large sorted array."""
    buckets = (hashes >> np.uint64(64 - bits)).astype(np.int64)
    mask = np.zeros(1 << bits, dtype=bool)
    mask[buckets] = True
    return np.packbits(mask, bitorder="little")


def filter_passes(bits: int, bitmap: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Positions of ``hashes`` whose prefix bit is set in ``bitmap`` (maybe in the set)."""
    bucket = hashes >> np.uint64(64 - bits)
    byte = bitmap[bucket >> np.uint64(3)]
    return np.flatnonzero((byte >> (bucket & np.uint64(7)).astype(np.uint8)) & 1)


@dataclass
class Hit:
    """One (text, benchmark n-gram) collision found by :meth:`NgramIndex.scan`."""

    doc: int  # index of the text in the scanned batch
    key: int  # the 64-bit n-gram hash (a signed int64 value, so it fits Arrow/Beam coders)
    n: int
    token: int  # start token within the text
    ngram: str  # normalised n-gram text
    benchmark: str
    example_id: str
    also: tuple[str, ...] = ()  # other benchmarks holding the same n-gram


def _signed(h: np.ndarray) -> np.ndarray:
    return h.view(np.int64)


class NgramIndex:
    """A built index directory, memory-mapped. See :class:`IndexWriter` for the layout."""

    def __init__(self, path: str | Path, mmap: bool = True) -> None:
        self.path = Path(path)
        meta_path = self.path / "index.json"
        if not meta_path.exists():
            raise FileNotFoundError(f"{self.path}: not an n-gram index (no index.json)")
        self.meta = json.loads(meta_path.read_text())
        found = (self.meta.get("format"), self.meta.get("version"), self.meta.get("hash"))
        if found != (INDEX_FORMAT, INDEX_VERSION, HASH_NAME):
            raise ValueError(
                f"{self.path}: index format/version/hash {found} does not match this code "
                f"({INDEX_FORMAT}, {INDEX_VERSION}, {HASH_NAME}); rebuild it"
            )
        self.benchmarks: list[dict[str, Any]] = self.meta["benchmarks"]
        self.benchmark_names = [b["name"] for b in self.benchmarks]
        mode = "r" if mmap else None
        self.arrays: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for n_str in self.meta["sizes"]:
            n = int(n_str)
            stem = self.path / f"n{n:02d}"
            self.arrays[n] = (
                np.load(f"{stem}.hash.npy", mmap_mode=mode),
                np.load(f"{stem}.bench.npy", mmap_mode=mode),
                np.load(f"{stem}.example.npy", mmap_mode=mode),
            )
        self.prefix_filter = (
            filter_bits(self.meta["prefixes"]),
            np.load(self.path / "prefix.filter.npy", mmap_mode=mode),
        )
        self._example_ids: dict[str, list[str]] | None = None

    @property
    def sizes(self) -> list[int]:
        return sorted(n for n, arrs in self.arrays.items() if arrs[0].size)

    @property
    def num_ngrams(self) -> int:
        return sum(a[0].size for a in self.arrays.values())

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays (hashes, benchmark and example numbers, prefix filter)."""
        arrays = sum(x.nbytes for arrs in self.arrays.values() for x in arrs)
        return arrays + self.prefix_filter[1].nbytes

    def example_id(self, bench: int, example: int) -> str:
        if self._example_ids is None:
            self._example_ids = json.loads((self.path / "example_ids.json").read_text())
        name = self.benchmark_names[bench]
        ids = self._example_ids.get(name)
        return ids[example] if ids else str(example)

    def contains(self, n: int, hashes: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``hashes`` (uint64) are n-grams of size ``n`` in the index
        (binary search; :meth:`scan` calls it only for positions past the prefix filter)."""
        table = self.arrays.get(n, (np.zeros(0, np.uint64),))[0]
        if table.size == 0 or hashes.size == 0:
            return np.zeros(hashes.shape, dtype=bool)
        pos = np.searchsorted(table, hashes)
        pos[pos == table.size] = table.size - 1
        return table[pos] == hashes

    def entries(self, n: int, h: np.uint64) -> list[tuple[int, int]]:
        """(benchmark number, example number) of every benchmark holding n-gram ``h``."""
        table, bench, example = self.arrays[n]
        lo = int(np.searchsorted(table, h, side="left"))
        hi = int(np.searchsorted(table, h, side="right"))
        return [(int(bench[i]), int(example[i])) for i in range(lo, hi)]

    def scan(self, texts: Sequence[str]) -> list[list[Hit]]:
        """Every distinct benchmark n-gram each text contains (one Hit per distinct n-gram
        per text).

        Every indexed n-gram, whatever its n, starts with one of the index's *prefix*
        4-grams; so the batch is hashed once at n = 4 and checked against the prefix
        filter, and only the few positions that pass are hashed at each n present and
        looked up. Cost is one pass over the text, nearly independent of how many distinct
        n (and benchmarks) the index holds. Python runs once per hit only."""
        batch = hash_tokens(texts)
        out: list[list[Hit]] = [[] for _ in texts]
        num_tokens = batch.hashes.size
        if num_tokens < MIN_N:
            return out
        h4 = ngram_hashes_by_n(batch, [MIN_N], within_docs=False)[MIN_N][0]
        cand = filter_passes(*self.prefix_filter, h4)
        doc_first = np.searchsorted(batch.doc, np.arange(len(texts)), side="left")
        names = self.benchmark_names
        for n in self.sizes:
            pos = cand[cand + n <= num_tokens]
            pos = pos[batch.doc[pos] == batch.doc[pos + n - 1]]  # inside one text
            if pos.size == 0:
                continue
            hashes = window_hashes(batch.hashes, pos, n)
            found = np.flatnonzero(self.contains(n, hashes))
            if found.size == 0:
                continue
            h, tok = hashes[found], pos[found]
            doc = batch.doc[tok]
            order = np.lexsort((tok, h, doc))  # by document, then n-gram, first position first
            h, tok, doc = h[order], tok[order], doc[order]
            first = np.ones(h.size, dtype=bool)
            first[1:] = (h[1:] != h[:-1]) | (doc[1:] != doc[:-1])
            h, tok, doc = h[first], tok[first], doc[first]
            table, bench, example = self.arrays[n]
            lo = np.searchsorted(table, h, side="left")
            hi = np.searchsorted(table, h, side="right")
            b0 = np.asarray(bench[lo]).tolist()
            e0 = np.asarray(example[lo]).tolist()
            keys = _signed(h).tolist()
            texts_of: dict[int, str] = {}
            for i, (key, start, d) in enumerate(zip(keys, tok.tolist(), doc.tolist(), strict=True)):
                text = texts_of.get(key)
                if text is None:
                    text = texts_of[key] = batch.ngram_text(start, n)
                also: tuple[str, ...] = ()
                if hi[i] - lo[i] > 1:
                    others = np.asarray(bench[lo[i] + 1 : hi[i]]).tolist()
                    also = tuple(sorted({names[b] for b in others} - {names[b0[i]]}))
                out[d].append(
                    Hit(d, key, n, start - int(doc_first[d]), text, names[b0[i]],
                        self.example_id(b0[i], e0[i]), also)
                )
        return out


class IndexWriter:
    """Collects benchmark n-grams and writes the index directory.

    Layout of ``out/``: ``index.json`` (format, hash name, per-benchmark n / examples /
    n-gram counts), ``example_ids.json`` (benchmark -> example ids, read only for reports),
    ``prefix.filter.npy`` (bitmap of the 4-gram each n-gram starts with, see
    :meth:`NgramIndex.scan`) and per n ``nNN.hash.npy`` (uint64, sorted), ``nNN.bench.npy``
    (uint16, or uint32 past 65,535 benchmarks), ``nNN.example.npy`` (uint32). An n-gram shared by several examples of
    one benchmark is stored once (first example); one shared by several benchmarks once per
    benchmark, so a reject can name them all."""

    def __init__(self) -> None:
        self.benchmarks: list[dict[str, Any]] = []
        self.example_ids: dict[str, list[str]] = {}
        self._parts: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._prefixes: list[np.ndarray] = []  # 4-gram hash at the start of each n-gram

    def add(
        self,
        name: str,
        n: int,
        example_ids: Sequence[str],
        segments: Sequence[tuple[int, str]],
        info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add one benchmark: ``segments`` are (example number, text) pairs. A segment with
        fewer than ``n`` tokens but at least MIN_N is indexed whole (as one shorter n-gram);
        shorter ones are too common to mean contamination and are skipped (counted)."""
        if name in self.example_ids:
            raise ValueError(f"benchmark {name!r} added twice")
        if not MIN_N <= n <= MAX_N:
            raise ValueError(f"{name}: n={n} outside {MIN_N}..{MAX_N}")
        bench_no = len(self.benchmarks)
        chunk = 4096
        seg_examples = np.fromiter((e for e, _ in segments), dtype=np.int64, count=len(segments))
        seg_tokens = np.zeros(len(segments), dtype=np.int64)
        for lo in range(0, len(segments), chunk):
            part = [text for _, text in segments[lo : lo + chunk]]
            seg_tokens[lo : lo + len(part)] = hash_tokens(part).doc_token_counts()
        num_examples = len(example_ids)
        has_full = np.zeros(num_examples, dtype=bool)
        has_full[seg_examples[seg_tokens >= n]] = True
        # A short segment is indexed whole only when its example has no n-gram otherwise:
        # "return n * (n + 1) // 2" next to a long prompt is no evidence of copying.
        whole = (seg_tokens >= MIN_N) & (seg_tokens < n) & ~has_full[seg_examples]
        per_n: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        groups = [(n, np.flatnonzero(seg_tokens >= n))] + [
            (m, np.flatnonzero(whole & (seg_tokens == m))) for m in range(MIN_N, n)
        ]
        for m, selected in groups:
            for lo in range(0, selected.size, chunk):
                sel = selected[lo : lo + chunk]
                batch = hash_tokens([segments[i][1] for i in sel])
                by_n = ngram_hashes_by_n(batch, sorted({m, MIN_N}))
                hashes, starts = by_n[m]
                h4, s4 = by_n[MIN_N]
                self._prefixes.append(np.unique(h4[np.searchsorted(s4, starts)]))
                per_n.setdefault(m, []).append((hashes, seg_examples[sel][batch.doc[starts]]))
        indexed = has_full | np.bincount(
            seg_examples[whole], minlength=num_examples
        ).astype(bool)
        skipped_segments = int(np.count_nonzero(seg_tokens < MIN_N))
        total = 0
        for m, parts in per_n.items():
            hashes = np.concatenate([p[0] for p in parts])
            examples = np.concatenate([p[1] for p in parts]).astype(np.uint32)
            hashes, first = np.unique(hashes, return_index=True)
            examples = examples[first]
            if hashes.size:
                bench = np.full(hashes.size, bench_no, dtype=np.uint32)
                self._parts.setdefault(m, []).append((hashes, bench, examples))
            total += int(hashes.size)
        record = {
            "name": name,
            "n": n,
            "examples": len(example_ids),
            "examples_indexed": int(np.count_nonzero(indexed)),
            "segments": len(segments),
            "segments_too_short": skipped_segments,
            "ngrams": total,
            **(info or {}),
        }
        self.benchmarks.append(record)
        self.example_ids[name] = [str(x) for x in example_ids]
        return record

    def write(self, out: str | Path) -> dict[str, Any]:
        """Sort, save and describe the index; returns its stats."""
        start = time.perf_counter()
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        for old in [*out.glob("n*.npy"), *out.glob("prefix.*.npy")]:
            old.unlink()
        bench_dtype = np.uint16 if len(self.benchmarks) < 65536 else np.uint32
        sizes: dict[str, int] = {}
        nbytes = 0
        for m in sorted(self._parts):
            parts = self._parts[m]
            hashes = np.concatenate([p[0] for p in parts])
            bench = np.concatenate([p[1] for p in parts]).astype(bench_dtype)
            example = np.concatenate([p[2] for p in parts])
            order = np.lexsort((bench, hashes))
            arrays = {"hash": hashes[order], "bench": bench[order], "example": example[order]}
            for suffix, arr in arrays.items():
                np.save(out / f"n{m:02d}.{suffix}.npy", arr)
                nbytes += arr.nbytes
            sizes[str(m)] = int(hashes.size)
        num = sum(sizes.values())
        prefixes = np.unique(np.concatenate(self._prefixes)) if self._prefixes else np.zeros(0, np.uint64)
        prefix_filter = build_filter(prefixes, filter_bits(prefixes.size))
        np.save(out / "prefix.filter.npy", prefix_filter)
        nbytes += prefix_filter.nbytes
        meta = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "hash": HASH_NAME,
            "sizes": sizes,
            "ngrams": num,
            "prefixes": int(prefixes.size),
            "bytes": nbytes,
            "benchmarks": self.benchmarks,
        }
        tmp = out / ".index.json.tmp"
        (out / "example_ids.json").write_text(json.dumps(self.example_ids))
        tmp.write_text(json.dumps(meta, indent=1))
        tmp.replace(out / "index.json")
        return {
            "benchmarks": len(self.benchmarks),
            "ngrams": num,
            "sizes": {int(k): v for k, v in sizes.items()},
            "index_bytes": nbytes,
            "mb_per_million_ngrams": (nbytes / 1e6) / (num / 1e6) if num else 0.0,
            "write_seconds": time.perf_counter() - start,
        }
