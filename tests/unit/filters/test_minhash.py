"""MinHash signatures: datasketch bit-compatibility, normalisation, estimate accuracy."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from datasketch import LeanMinHash, MinHash, MinHashLSH

from afm.filters.minhash import (
    MAX_HASH32,
    MinHasher,
    band_keys,
    candidate_probability,
    content_hash,
    lsh_params,
    normalize_text,
    shingle_hash32,
    shingle_jaccard,
    shingles,
    signature_jaccard,
)
from tests.threads import in_threads

WORDS = [f"w{i}" for i in range(3000)]


def random_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


@pytest.fixture(scope="module")
def hasher() -> MinHasher:
    return MinHasher(num_perm=128, seed=1, ngram=5)


def test_normalisation_folds_case_punctuation_and_unicode_forms() -> None:
    text = "Hello,  WORLD! — It’s “quoted”…\u00a0ﬁne_tuning ＦＵＬＬ width"
    assert normalize_text(text) == "hello world it s quoted fine tuning full width"
    assert normalize_text("") == "" and normalize_text(" .,;!? ") == ""


def test_signatures_equal_datasketch_update_batch(hasher: MinHasher) -> None:
    rng = random.Random(0)
    texts = [random_text(rng, rng.randint(0, 300)) for _ in range(20)]
    texts += ["", "one", "two words", "Ünïcödé ＦＵＬＬ — “quotes” 日本語、テスト。", "a b c d e f"]
    sigs = hasher.signatures(texts)
    for text, row in zip(texts, sigs):
        reference = MinHash(num_perm=128, seed=1, hashfunc=shingle_hash32, scheme="affine32")
        reference.update_batch(shingles(text, 5))
        assert np.array_equal(reference.hashvalues, row), text[:60]
        assert np.array_equal(hasher.datasketch_minhash(text).hashvalues, row)


def test_vectorised_normalisation_matches_reference_on_mixed_unicode(hasher: MinHasher) -> None:
    """The byte-level separator marking must agree with the regex reference everywhere."""
    rng = random.Random(1)
    common = "abcXYZ019 ,._-\n\t\u00a0\u00e9\u00c9\u00ab\u2014\u201c\u2026\u3001\u3002\u65e5\u00b7\u00d7ß"
    common += "ﬁ！\ud800\u03c3\u0416\u0436\u1ea0\U00010428\U0001f600\u0301\u10a0\uff21\u00c5"
    # Characters only Python lower-cases right (final sigma, length-changing cases).
    special = "\u03a3\u0130\u1e9e\u2126\u212a\U00010400\U0001e900"
    for alphabet, n_texts in ((common, 400), (common + special, 150)):
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(n_texts)]
        sk = hasher.sketch(texts)
        for text, row, digest in zip(texts, sk.signatures, sk.content_hashes):
            assert np.array_equal(hasher.datasketch_minhash(text).hashvalues, row), repr(text)
            assert bytes(digest) == content_hash(text), repr(text)


def test_lean_minhash_and_lsh_interop(hasher: MinHasher) -> None:
    rng = random.Random(2)
    base = random_text(rng, 300)
    near = base.replace(base.split()[10], "changed", 1)
    far = random_text(rng, 300)
    sigs = hasher.signatures([base, near, far])
    bands, rows = lsh_params(0.8, 128, 0.1, 0.9)
    lsh = MinHashLSH(num_perm=128, params=(bands, rows))
    lsh.insert("base", hasher.lean_minhash(sigs[0]))
    assert isinstance(hasher.lean_minhash(sigs[1]), LeanMinHash)
    assert lsh.query(hasher.lean_minhash(sigs[1])) == ["base"]
    assert lsh.query(hasher.lean_minhash(sigs[2])) == []


def test_empty_and_tiny_documents(hasher: MinHasher) -> None:
    sk = hasher.sketch(["", "!!! ...", "tiny", "two words here"])
    assert (sk.signatures[0] == MAX_HASH32).all() and (sk.signatures[1] == MAX_HASH32).all()
    assert list(sk.num_words) == [0, 0, 1, 3]
    assert list(sk.num_shingles) == [0, 0, 1, 1]  # fewer words than n: one shingle of all
    assert shingles("two words here") == [b"two words here"]
    assert bytes(sk.content_hashes[0]) == bytes(16)
    # Same normalised text -> same content hash; different text -> different.
    a, b, c = hasher.sketch(["Tiny!", "  tiny ", "tinier"]).content_hashes
    assert bytes(a) == bytes(b) != bytes(c)


def test_estimated_jaccard_within_datasketch_error_bounds(hasher: MinHasher) -> None:
    """|estimate - exact| stays within 4 standard errors sqrt(J(1-J)/k) for every pair,
    and the mean error is unbiased, over overlaps from 0.1 to 0.99."""
    rng = random.Random(3)
    pairs = []
    for _ in range(120):
        words = rng.choices(WORDS, k=400)
        other = list(words)
        n_edit = rng.randint(1, 120)
        for i in rng.sample(range(len(other)), n_edit):
            other[i] = rng.choice(WORDS)
        pairs.append((" ".join(words), " ".join(other)))
    sigs = hasher.signatures([t for pair in pairs for t in pair])
    errors = []
    for i, (a, b) in enumerate(pairs):
        exact = shingle_jaccard(a, b, 5)
        estimate = float(signature_jaccard(sigs[2 * i], sigs[2 * i + 1]))
        sigma = math.sqrt(max(exact * (1 - exact), 1e-4) / 128)
        assert abs(estimate - exact) <= 4 * sigma + 1 / 128, (exact, estimate)
        errors.append(estimate - exact)
    assert abs(float(np.mean(errors))) < 0.01


def test_lsh_params_are_datasketch_optimiser_choice() -> None:
    for weights in ((0.5, 0.5), (0.1, 0.9)):
        lsh = MinHashLSH(threshold=0.8, num_perm=128, weights=weights)
        assert lsh_params(0.8, 128, *weights) == (lsh.b, lsh.r)
    bands, rows = lsh_params(0.8, 128, 0.1, 0.9)
    assert candidate_probability(0.9, bands, rows) > 0.99
    assert candidate_probability(0.5, bands, rows) < 0.05


def test_band_keys_match_iff_band_values_match(hasher: MinHasher) -> None:
    rng = random.Random(4)
    base = random_text(rng, 200)
    sigs = hasher.signatures([base, base + " x", random_text(rng, 200)])
    keys = band_keys(sigs, 14, 9)
    assert keys.shape == (3, 14) and keys.dtype == np.int64
    for band in range(14):
        cols = slice(band * 9, (band + 1) * 9)
        same = np.array_equal(sigs[0, cols], sigs[1, cols])
        assert (keys[0, band] == keys[1, band]) == same
    assert len(set(keys[2]) & set(keys[0])) == 0
    with pytest.raises(ValueError):
        band_keys(sigs, 20, 9)


def test_reused_block_carries_nothing_between_batches_threads_or_pickles() -> None:
    """Each thread reuses one permutation block (a fresh one is a new mapping under a local
    run's 128 kB threshold): signatures are the same whatever ran before, in another thread,
    with a document longer than the block, and after a pickle round trip (a DoFn's hasher)."""
    import pickle

    rng = random.Random(5)
    small = MinHasher(num_perm=128, seed=3, chunk_rows=1024)
    batches = [[random_text(rng, n) for n in sizes] for sizes in ((900, 50, 800), (2000,), (3, 3), (700, 100))]
    want = [MinHasher(num_perm=128, seed=3, chunk_rows=1024).signatures(b) for b in batches]  # fresh each
    assert all(np.array_equal(small.signatures(b), w) for b, w in zip(batches, want))
    assert np.shares_memory(small._block(10), small._block(1024))
    assert not np.shares_memory(small._block(10), small._block(1025))  # longer than the block
    again = pickle.loads(pickle.dumps(small))
    assert all(np.array_equal(again.signatures(b), w) for b, w in zip(batches, want))
    got = in_threads(lambda k: [small.signatures(b) for b in (batches[k:] + batches[:k]) * 10], 3)
    for k, sigs in enumerate(got):
        assert all(np.array_equal(s, w) for s, w in zip(sigs, (want[k:] + want[:k]) * 10))
