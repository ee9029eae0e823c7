"""MinHash signatures for near-duplicate detection, vectorised over batches of documents.

Why this module exists: datasketch hashes every shingle with a Python call and updates one
sketch at a time, which costs ~0.5 ms per 300-word document. Here a whole batch of
documents is processed with a handful of numpy passes over one byte buffer:

1. **Normalisation** (:func:`normalize_words`): NFKC, lower case (exactly ``str.lower``,
   but applied to the UTF-8 bytes through lookup tables: ``str.lower`` alone costs more
   than the whole signature on non-ASCII text), then words are the maximal runs of
   non-separator characters. Separators are ASCII non-alphanumerics (``_``
   included), U+0080-U+00BF (Latin-1 punctuation, NBSP), U+2000-U+206F (general
   punctuation: dashes, curly quotes, ellipsis, odd spaces) and U+3000-U+303F (CJK
   punctuation). The normalised text is the words joined by single spaces.
2. **Word hashes**: a 64-bit polynomial hash of each word's UTF-8 bytes computed for all
   words at once from a prefix sum over the buffer (mod 2^64), then MurmurHash3's fmix64.
3. **Shingles**: word n-grams (default 5). A shingle's hash is the polynomial of its word
   hashes, again from a prefix sum, so no n-gram string is ever built. The 32-bit shingle
   hash is the top half of fmix64 of that value. Documents with 1 to n-1 words have one
   shingle (all their words); documents without words have none.
4. **MinHash**: exactly datasketch 2.x's default ``"affine32"`` scheme: ``fmix32`` of the
   shingle hash, then ``a*x + b mod 2^32`` with datasketch's own permutation parameters
   for ``(num_perm, seed)``, min-reduced per document with ``np.minimum.reduceat``.

Bit compatibility: :func:`shingle_hash32` is the same shingle hash in plain Python, so
``MinHash(num_perm, seed, hashfunc=shingle_hash32).update_batch(shingles(text))`` gives the
very same ``hashvalues`` as :meth:`MinHasher.signatures`; any row can be wrapped as a
datasketch ``LeanMinHash`` (:meth:`MinHasher.lean_minhash`) and used with ``MinHashLSH``.

The polynomial hashes are mod 2^64 with fixed odd bases: fine for de-duplication (a rare
collision only adds one shared shingle), not meant to resist crafted inputs.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from afm.filters.scratch import ThreadArrays

NORMALIZATION_VERSION = 1  # bump when normalisation or hashing changes (index files check it)
SCHEME = "affine32"  # datasketch's permutation scheme these signatures follow
MAX_HASH32 = np.uint32(0xFFFFFFFF)  # datasketch's "empty" value for affine32

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
# Odd 64-bit bases (xxHash / golden-ratio constants): bytes -> word, words -> shingle,
# and a second word base so the exact content hash has 128 bits.
_P_BYTE = 0x9E3779B97F4A7C15
_Q_WORD = 0xC2B2AE3D27D4EB4F
_Q_WORD2 = 0x165667B19E3779F9
_BAND_PRIME = 0x100000001B3  # FNV-1a 64-bit prime, for mixing band values

_SEPARATORS = "\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\xbf\u2000-\u206f\u3000-\u303f"
_WORD_RE = re.compile(f"[^{_SEPARATORS}]+")


# --------------------------------------------------------------------------- normalisation


def _prepare(text: str) -> bytes:
    """NFKC + lower case, UTF-8 (lone surrogates become ``?``, a separator)."""
    return unicodedata.normalize("NFKC", text).lower().encode("utf-8", "replace")


def normalize_words(text: str) -> list[str]:
    """The words of ``text`` after normalisation (reference implementation, pure Python)."""
    return _WORD_RE.findall(_prepare(text).decode("utf-8"))


def normalize_text(text: str) -> str:
    """Canonical form used for exact de-duplication: normalised words joined by spaces."""
    return " ".join(normalize_words(text))


def shingles(text: str, ngram: int = 5) -> list[bytes]:
    """The word ``ngram``-shingles of ``text`` as UTF-8 bytes (reference implementation).

    Fewer than ``ngram`` words give one shingle of all of them; no words give none.
    """
    words = normalize_words(text)
    if not words:
        return []
    if len(words) < ngram:
        return [" ".join(words).encode("utf-8")]
    return [" ".join(words[i : i + ngram]).encode("utf-8") for i in range(len(words) - ngram + 1)]


# ------------------------------------------------------------------------------ hashing


def _fmix64_int(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK64
    return h ^ (h >> 33)


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U64(33))


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer, as datasketch applies it before the permutations."""
    u32 = np.uint32
    h = h ^ (h >> u32(16))
    h = h * u32(0x85EBCA6B)
    h = h ^ (h >> u32(13))
    h = h * u32(0xC2B2AE35)
    return h ^ (h >> u32(16))


def _word_hash_int(word: bytes) -> int:
    h, power = 0, 1
    for c in word:
        h = (h + c * power) & _MASK64
        power = (power * _P_BYTE) & _MASK64
    return _fmix64_int(h)


def _poly_int(values: Sequence[int], base: int) -> int:
    h, power = 0, 1
    for v in values:
        h = (h + v * power) & _MASK64
        power = (power * base) & _MASK64
    return h


def shingle_hash32(shingle: bytes | str) -> int:
    """The 32-bit hash of one shingle (words separated by single spaces); pure Python.

    Pass it to datasketch as ``MinHash(hashfunc=shingle_hash32)`` to reproduce
    :meth:`MinHasher.signatures` bit for bit.
    """
    if isinstance(shingle, str):
        shingle = shingle.encode("utf-8")
    words = [_word_hash_int(w) for w in shingle.split(b" ")]
    return _fmix64_int(_poly_int(words, _Q_WORD)) >> 32


def content_hash(text: str) -> bytes:
    """16-byte hash of the normalised text (exact de-duplication); pure Python reference
    of the ``content_hashes`` column of :meth:`MinHasher.sketch`. Empty text -> 16 zeros."""
    words = [_word_hash_int(w.encode("utf-8")) for w in normalize_words(text)]
    if not words:
        return bytes(16)
    h1 = _fmix64_int(_poly_int(words, _Q_WORD))
    h2 = _fmix64_int(_poly_int(words, _Q_WORD2))
    return np.array([h1, h2], dtype="<u8").tobytes()


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


@functools.lru_cache(maxsize=1)
def _lower_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lookup tables for ``str.lower`` on UTF-8 bytes, built once per process (~0.1 s).

    Returns (ASCII byte map, BMP code point -> lower code point, BMP "special" flags,
    sorted supplementary code points that change case). *Special* characters are those
    whose lower case is not one code point of the same UTF-8 length (e.g. U+0130), plus
    U+03A3 whose lower case depends on context (final sigma): a document containing one
    is lower-cased by Python instead, so results always equal ``str.lower``.
    """
    ascii_map = np.arange(256, dtype=np.uint8)
    ascii_map[ord("A") : ord("Z") + 1] += 32
    bmp = np.arange(0x10000, dtype=np.uint32)
    special = np.zeros(0x10000, dtype=bool)
    for cp in range(0x80, 0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        low = chr(cp).lower()
        if low == chr(cp):
            continue
        if len(low) == 1 and _utf8_len(ord(low)) == _utf8_len(cp):
            bmp[cp] = ord(low)
        else:
            special[cp] = True
    special[0x03A3] = True
    # Planes 2-16 hold no cased letters; plane 1 has a few scripts (Deseret, Adlam...).
    supp = np.array([cp for cp in range(0x10000, 0x20000) if chr(cp).lower() != chr(cp)], dtype=np.uint32)
    return ascii_map, bmp, special, supp


def _lower_utf8(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower-case UTF-8 bytes like ``str.lower``; returns (new bytes, byte positions of
    special characters that need Python's ``str.lower``)."""
    ascii_map, bmp, special, supp = _lower_tables()
    out = ascii_map[buf]
    hi = np.flatnonzero(buf >= 0xC0)
    if not len(hi):
        return out, hi
    lead = buf[hi]
    flagged = []
    u32 = np.uint32
    for mask, value, width in ((0xE0, 0xC0, 2), (0xF0, 0xE0, 3)):
        pos = hi[(lead & mask) == value]
        if not len(pos):
            continue
        cp = (buf[pos].astype(u32) & u32(0xFF >> (width + 1))) << u32(6 * (width - 1))
        for k in range(1, width):
            cp |= (buf[pos + k].astype(u32) & u32(0x3F)) << u32(6 * (width - 1 - k))
        flagged.append(pos[special[cp]])
        new = bmp[cp]
        changed = new != cp
        pos, new = pos[changed], new[changed]
        out[pos] = ((u32(0xFF << (8 - width)) & u32(0xFF)) | (new >> u32(6 * (width - 1)))).astype(np.uint8)
        for k in range(1, width):
            out[pos + k] = (u32(0x80) | ((new >> u32(6 * (width - 1 - k))) & u32(0x3F))).astype(np.uint8)
    pos = hi[(lead & 0xF8) == 0xF0]
    if len(pos):
        cp = (buf[pos].astype(u32) & u32(0x07)) << u32(18)
        for k, shift in ((1, 12), (2, 6), (3, 0)):
            cp |= (buf[pos + k].astype(u32) & u32(0x3F)) << u32(shift)
        flagged.append(pos[np.isin(cp, supp)])
    return out, (np.concatenate(flagged) if flagged else hi[:0])


@functools.lru_cache(maxsize=8)
def _byte_table() -> np.ndarray:
    """Per-byte 'is a word byte' lookup for the single-byte (ASCII) range; bytes >= 0x80
    count as word bytes here and the multi-byte separators are fixed up afterwards."""
    table = np.ones(256, dtype=bool)
    for c in range(0x80):
        table[c] = chr(c).isascii() and chr(c).isalnum()
    return table


class _Powers:
    """Cached powers base^i and base^-i mod 2^64 (grown on demand)."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.inverse = pow(base, -1, 1 << 64)
        self.pos = np.ones(1, dtype=_U64)
        self.neg = np.ones(1, dtype=_U64)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.pos) < n:
            size = max(n, 2 * len(self.pos))
            pos = np.full(size, self.base, dtype=_U64)
            pos[0] = 1
            neg = np.full(size, self.inverse, dtype=_U64)
            neg[0] = 1
            self.pos = np.cumprod(pos, dtype=_U64)
            self.neg = np.cumprod(neg, dtype=_U64)
        return self.pos[:n], self.neg[:n]


def _windows(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, powers: _Powers) -> np.ndarray:
    """Polynomial hash sum_k values[k] * base^(k-start) of every window [start, end)."""
    pos, neg = powers.get(len(values) + 1)
    prefix = np.zeros(len(values) + 1, dtype=_U64)
    np.cumsum(values * pos[: len(values)], dtype=_U64, out=prefix[1:])
    return (prefix[ends] - prefix[starts]) * neg[starts]


@dataclass
class Sketches:
    """What :meth:`MinHasher.sketch` computes for a batch of documents."""

    signatures: np.ndarray  # (docs, num_perm) uint32; rows of MAX_HASH32 for wordless docs
    content_hashes: np.ndarray  # (docs, 16) uint8; zeros for wordless docs
    num_words: np.ndarray  # (docs,) int64
    num_shingles: np.ndarray  # (docs,) int64


class MinHasher:
    """Vectorised MinHash signatures compatible with datasketch's ``affine32`` MinHash.

    Args:
        num_perm: signature length (datasketch ``num_perm``).
        seed: permutation seed (datasketch ``seed``); same seed -> same permutations.
        ngram: words per shingle.
        chunk_rows: shingles per permutation block; bounds the (rows x num_perm) uint32
            temporary (2 MiB at 4096 x 128) so it stays in cache. Each thread reuses one
            such block from batch to batch: a fresh one is a new mapping where the
            allocator maps blocks above 128 kB (a local curate run's own process,
            pipelines/beam/allocator.py), faulted in again for every chunk.
    """

    def __init__(self, num_perm: int = 128, seed: int = 1, ngram: int = 5, chunk_rows: int = 4096):
        if num_perm < 1 or ngram < 1:
            raise ValueError(f"num_perm and ngram must be positive (got {num_perm}, {ngram})")
        from datasketch import MinHash

        self.num_perm, self.seed, self.ngram, self.chunk_rows = num_perm, seed, ngram, chunk_rows
        # datasketch's own parameters: bit-identical permutations for (num_perm, seed).
        perms = MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations
        self.a = np.ascontiguousarray(perms[0], dtype=np.uint32)
        self.b = np.ascontiguousarray(perms[1], dtype=np.uint32)
        self._byte_pows = _Powers(_P_BYTE)
        self._word_pows = _Powers(_Q_WORD)
        self._word_pows2 = _Powers(_Q_WORD2)
        self._scratch = ThreadArrays()

    def _block(self, width: int) -> np.ndarray:
        """A (num_perm, width) uint32 array, contiguous: a view of this thread's reused
        block when ``width`` fits ``chunk_rows`` (a document longer than that gets its own)."""
        if width > self.chunk_rows:
            return np.empty((self.num_perm, width), dtype=np.uint32)
        return self._scratch.view("block", (self.num_perm, width), np.uint32, self.num_perm * self.chunk_rows)

    # -- the vectorised path -------------------------------------------------------------

    def _words(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(word hashes uint64, doc index of each word, words per doc) for a batch."""
        # NFKC in Python (C speed); lower case on the UTF-8 bytes with lookup tables,
        # several times faster than str.lower on non-ASCII text.
        encoded = [unicodedata.normalize("NFKC", t).encode("utf-8", "replace") for t in texts]
        buf, doc_starts = self._lowered_buffer(encoded)
        if len(self._special_docs):
            for i in self._special_docs.tolist():
                encoded[i] = _prepare(texts[i])
            buf, doc_starts = self._lowered_buffer(encoded)
        is_word = _byte_table()[buf]
        if len(buf):
            self._mark_multibyte_separators(buf, is_word)
        edges = np.diff(is_word.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        pos, neg = self._byte_pows.get(len(buf) + 1)
        prefix = np.zeros(len(buf) + 1, dtype=_U64)
        np.cumsum(buf.astype(_U64) * pos[: len(buf)], dtype=_U64, out=prefix[1:])
        word_hashes = _fmix64((prefix[ends] - prefix[starts]) * neg[starts])
        doc_of_word = np.searchsorted(doc_starts, starts, side="right") - 1
        words_per_doc = np.bincount(doc_of_word, minlength=len(encoded)).astype(np.int64)
        return word_hashes, doc_of_word, words_per_doc

    def _lowered_buffer(self, encoded: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Join documents with NUL (a separator), lower-case; remember documents holding
        characters only Python can lower-case correctly (``self._special_docs``)."""
        lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
        doc_starts = np.zeros(len(encoded), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=doc_starts[1:])
        raw = np.frombuffer(b"\x00".join(encoded), dtype=np.uint8)
        buf, special_pos = _lower_utf8(raw)
        self._special_docs = np.unique(np.searchsorted(doc_starts, special_pos, side="right") - 1)
        return buf, doc_starts

    @staticmethod
    def _mark_multibyte_separators(buf: np.ndarray, is_word: np.ndarray) -> None:
        """Mark the UTF-8 bytes of U+0080-U+00BF, U+2000-U+206F, U+3000-U+303F as separators."""
        padded = np.concatenate([buf, np.zeros(2, dtype=np.uint8)])
        lead = np.flatnonzero(buf == 0xC2)
        is_word[lead] = False
        is_word[np.minimum(lead + 1, len(buf) - 1)] = False
        e2 = np.flatnonzero(buf == 0xE2)
        second, third = padded[e2 + 1], padded[e2 + 2]
        e2 = e2[(second == 0x80) | ((second == 0x81) & (third <= 0xAF))]
        e3 = np.flatnonzero(buf == 0xE3)
        e3 = e3[padded[e3 + 1] == 0x80]
        for lead3 in (e2, e3):
            for k in range(3):
                is_word[np.minimum(lead3 + k, len(buf) - 1)] = False

    def sketch(self, texts: Sequence[str]) -> Sketches:
        """Signatures and exact-content hashes of a batch of texts in one pass."""
        n_docs = len(texts)
        word_hashes, _doc_of_word, words_per_doc = self._words(texts)
        word_start = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(words_per_doc, out=word_start[1:])
        doc_first = word_start[:-1]

        # Exact content hash: two polynomials over all of a document's words.
        content = np.zeros((n_docs, 2), dtype=_U64)
        has_words = words_per_doc > 0
        if word_hashes.size:
            s, e = doc_first[has_words], word_start[1:][has_words]
            content[has_words, 0] = _fmix64(_windows(word_hashes, s, e, self._word_pows))
            content[has_words, 1] = _fmix64(_windows(word_hashes, s, e, self._word_pows2))
        content_bytes = content.astype("<u8").view(np.uint8).reshape(n_docs, 16)

        # Shingle windows: [i, i+n) inside each document; a short document gets one window.
        n = self.ngram
        shingles_per_doc = np.where(words_per_doc >= n, words_per_doc - n + 1, has_words.astype(np.int64))
        sig = np.full((n_docs, self.num_perm), MAX_HASH32, dtype=np.uint32)
        total = int(shingles_per_doc.sum())
        if total:
            doc_idx = np.repeat(np.arange(n_docs), shingles_per_doc)
            shingle_first = np.zeros(n_docs + 1, dtype=np.int64)
            np.cumsum(shingles_per_doc, out=shingle_first[1:])
            local = np.arange(total) - shingle_first[doc_idx]
            win_start = doc_first[doc_idx] + local
            win_end = np.minimum(win_start + n, word_start[1:][doc_idx])
            h64 = _fmix64(_windows(word_hashes, win_start, win_end, self._word_pows))
            h32 = (h64 >> _U64(32)).astype(np.uint32)
            self._permute_min(_fmix32(h32), shingles_per_doc, sig)
        return Sketches(sig, content_bytes, words_per_doc, shingles_per_doc)

    def _permute_min(self, x: np.ndarray, counts: np.ndarray, out: np.ndarray) -> None:
        """out[d] = min over doc d's shingles of (a*x + b mod 2^32), in cache-sized blocks.

        The block is laid out (num_perm, shingles) so that ``minimum.reduceat`` runs along
        contiguous memory: ~10x faster than reducing a (shingles, num_perm) block on axis 0.
        """
        docs = np.flatnonzero(counts)
        bounds = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(counts[docs], out=bounds[1:])
        a, b = self.a[:, None], self.b[:, None]
        i = 0
        while i < len(docs):
            # As many whole documents as fit in chunk_rows (at least one).
            j = int(np.searchsorted(bounds, bounds[i] + self.chunk_rows, side="right")) - 1
            j = max(j, i + 1)
            lo, hi = bounds[i], bounds[j]
            block = np.multiply(a, x[None, lo:hi], out=self._block(int(hi - lo)))
            block += b
            out[docs[i:j]] = np.minimum.reduceat(block, bounds[i:j] - lo, axis=1).T
            i = j

    def signatures(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), num_perm) uint32 MinHash signatures (datasketch ``hashvalues``)."""
        return self.sketch(texts).signatures

    # -- datasketch interop -------------------------------------------------------------

    def lean_minhash(self, signature: np.ndarray):
        """A datasketch ``LeanMinHash`` holding ``signature`` (for ``MinHashLSH`` etc.)."""
        from datasketch import LeanMinHash

        return LeanMinHash(seed=self.seed, hashvalues=signature, scheme=SCHEME)

    def datasketch_minhash(self, text: str):
        """The reference: datasketch's own ``update_batch`` over :func:`shingles`."""
        from datasketch import MinHash

        mh = MinHash(num_perm=self.num_perm, seed=self.seed, hashfunc=shingle_hash32, scheme=SCHEME)
        mh.update_batch(shingles(text, self.ngram))
        return mh


# ------------------------------------------------------------------------------- LSH


@functools.lru_cache(maxsize=64)
def lsh_params(
    threshold: float, num_perm: int, false_positive_weight: float = 0.5, false_negative_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false-positive/negative probability mass:
    the choice datasketch's ``MinHashLSH`` makes for these arguments (its optimiser)."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    from datasketch import MinHashLSH

    try:
        lsh = MinHashLSH(
            threshold=threshold, num_perm=num_perm, weights=(false_positive_weight, false_negative_weight)
        )
    except ValueError as exc:
        raise ValueError(
            f"no LSH parameters for threshold={threshold}, num_perm={num_perm}, "
            f"weights=({false_positive_weight}, {false_negative_weight}): {exc}"
        ) from exc
    return int(lsh.b), int(lsh.r)


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """P(two documents with Jaccard ``similarity`` share at least one band)."""
    return 1.0 - (1.0 - similarity**rows) ** bands


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(docs, bands) int64 bucket keys: a 64-bit hash of each band's ``rows`` values,
    salted with the band index so equal values in different bands never meet."""
    if bands * rows > signatures.shape[1]:
        raise ValueError(f"{bands} bands x {rows} rows exceed num_perm={signatures.shape[1]}")
    sig = signatures.astype(_U64)
    out = np.empty((signatures.shape[0], bands), dtype=_U64)
    for band in range(bands):
        h = np.full(signatures.shape[0], _fmix64_int(band + 1), dtype=_U64)
        for col in range(band * rows, (band + 1) * rows):
            h = (h ^ sig[:, col]) * _U64(_BAND_PRIME)
        out[:, band] = _fmix64(h)
    return out.view(np.int64)


def signature_jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """Estimated Jaccard: the fraction of equal positions (rows of ``b`` vs ``a``)."""
    return np.mean(np.asarray(a) == np.asarray(b), axis=-1)


def jaccard(a: set, b: set) -> float:
    """Exact Jaccard similarity of two sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def shingle_jaccard(text_a: str, text_b: str, ngram: int = 5) -> float:
    """Exact Jaccard of the two texts' shingle sets (the ground truth MinHash estimates)."""
    return jaccard(set(shingles(text_a, ngram)), set(shingles(text_b, ngram)))
