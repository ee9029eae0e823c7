"""Normalisation, vectorised hashing and the memory-mapped index."""

from __future__ import annotations

import random

import numpy as np
import pytest

from afm.filters.ngram_index import (
    IndexWriter,
    NgramIndex,
    hash_tokens,
    ngram_hashes,
    ngram_hashes_by_n,
    normalize_text,
    tokenize,
)

ODD_TEXTS = [
    "Janet’s ducks lay 16 eggs per day.",
    "JANET'S  DUCKS\nlay 16\teggs, per-day!",
    "ｆｕｌｌｗｉｄｔｈ ﬁne café Straße",
    "soft\u00adhyphen and zero\u200bwidth",
    "Привет, мир! हिन्दी पाठ; naïve",
    "",
    "   ...!!!   ",
    "x_y snake_case a+b=c $5.00",
]


def test_normalisation_ignores_case_punctuation_and_line_breaks() -> None:
    assert tokenize(ODD_TEXTS[0]) == tokenize(ODD_TEXTS[1])
    assert tokenize(ODD_TEXTS[0]) == ["janet", "s", "ducks", "lay", "16", "eggs", "per", "day"]


def test_normalisation_nfkc_and_invisible_characters() -> None:
    assert tokenize(ODD_TEXTS[2]) == ["fullwidth", "fine", "café", "straße"]
    assert tokenize(ODD_TEXTS[3]) == ["softhyphen", "and", "zerowidth"]


def test_non_ascii_words_keep_their_marks() -> None:
    # Devanagari vowel signs and viramas are marks (Mc/Mn): part of the word, not boundaries.
    assert tokenize(ODD_TEXTS[4]) == ["привет", "мир", "हिन्दी", "पाठ", "naïve"]


def test_empty_and_punctuation_only() -> None:
    assert tokenize("") == [] and tokenize(ODD_TEXTS[6]) == []
    assert normalize_text(ODD_TEXTS[7]) == "x y snake case a b c 5 00"


def _random_text(rng: random.Random) -> str:
    alphabet = "abcde ÄöЖж\u00ad\u200b.,;!?\n\t-'’ｆ１ﬁ"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))


def test_batch_tokens_match_tokenize() -> None:
    rng = random.Random(0)
    texts = ODD_TEXTS + [_random_text(rng) for _ in range(200)]
    batch = hash_tokens(texts)
    got: list[list[str]] = [[] for _ in texts]
    for i, d in enumerate(batch.doc):
        got[d].append(batch.token_text(i))
    assert got == [tokenize(t) for t in texts]


def test_hashes_depend_only_on_the_tokens() -> None:
    """Same token sequence -> same n-gram hashes, whatever the batch, script or spelling."""
    alone = ngram_hashes(["Hello world foo bar baz"], 4)
    batched = ngram_hashes(["Привет", "hello, WORLD\nfoo bar baz", "x"], 4)
    assert alone.size == 2 and np.array_equal(alone, batched)
    # distinct token sequences give distinct hashes; n is part of the hash
    h4 = ngram_hashes(["a b c d e f g h"], 4)
    assert np.unique(h4).size == 5
    assert not set(h4) & set(ngram_hashes(["a b c d e f g h"], 5))


def test_ngrams_never_cross_documents() -> None:
    batch = hash_tokens(["one two three", "four five six seven"])
    by_n = ngram_hashes_by_n(batch, [3, 4, 5])
    assert by_n[3][0].size == 1 + 2
    assert by_n[4][0].size == 1
    assert by_n[5][0].size == 0


def _build(tmp_path, benchmarks: dict[str, tuple[int, list[str]]]) -> NgramIndex:
    writer = IndexWriter()
    for name, (n, examples) in benchmarks.items():
        writer.add(name, n, [f"{name}-{i}" for i in range(len(examples))],
                   list(enumerate(examples)))
    writer.write(tmp_path / "idx")
    return NgramIndex(tmp_path / "idx")


def test_index_is_sorted_memory_mapped_and_compact(tmp_path) -> None:
    idx = _build(tmp_path, {"a": (4, ["the cat sat on the mat today"]),
                            "b": (5, ["one two three four five six"])})
    assert idx.sizes == [4, 5]
    for table, bench, example in idx.arrays.values():
        assert isinstance(table, np.memmap)
        assert np.all(table[:-1] <= table[1:])
        assert bench.dtype == np.uint16 and example.dtype == np.uint32
    assert idx.num_ngrams == 4 + 2


def test_scan_matches_a_naive_set_of_strings(tmp_path) -> None:
    rng = random.Random(1)
    words = [f"w{i}" for i in range(30)]
    examples = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 15))) for _ in range(40)]
    idx = _build(tmp_path, {"bench": (6, examples)})
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 80))) for _ in range(200)]
    docs += [f"intro text {examples[3]} outro"]
    naive_set = set()
    for ex in examples:
        toks = tokenize(ex)
        naive_set.update(" ".join(toks[i : i + 6]) for i in range(len(toks) - 5))
    for doc, hits in zip(docs, idx.scan(docs), strict=True):
        toks = tokenize(doc)
        expected = {" ".join(toks[i : i + 6]) for i in range(len(toks) - 5)} & naive_set
        assert {h.ngram for h in hits} == expected
    assert idx.scan([docs[-1]])[0][0].example_id == "bench-3"


def test_shared_ngram_names_every_benchmark(tmp_path) -> None:
    idx = _build(tmp_path, {"a": (4, ["alpha beta gamma delta"]), "b": (4, ["alpha beta gamma delta"])})
    (hit,) = idx.scan(["x alpha beta gamma delta y"])[0]
    assert {hit.benchmark, *hit.also} == {"a", "b"}


def test_index_from_another_hash_version_is_refused(tmp_path) -> None:
    _build(tmp_path, {"a": (4, ["alpha beta gamma delta"])})
    meta = tmp_path / "idx" / "index.json"
    meta.write_text(meta.read_text().replace("poly-cp64", "old-hash"))
    with pytest.raises(ValueError, match="rebuild"):
        NgramIndex(tmp_path / "idx")


def test_scan_with_many_n_matches_naive(tmp_path) -> None:
    """Several benchmarks with different n (the prefix-filter path) find exactly the
    n-grams a naive per-n set scan finds."""
    rng = random.Random(2)
    words = [f"v{i}" for i in range(12)]
    benches = {
        f"b{n}": (n, [" ".join(rng.choice(words) for _ in range(rng.randint(n, 20))) for _ in range(15)])
        for n in (4, 6, 9, 13)
    }
    idx = _build(tmp_path, benches)
    assert idx.sizes == [4, 6, 9, 13]
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 60))) for _ in range(150)]
    docs += [f"x {benches['b13'][1][0]} y", "", "v1"]
    naive: dict[int, set[str]] = {}
    for n, examples in benches.values():
        for ex in examples:
            toks = tokenize(ex)
            naive.setdefault(n, set()).update(" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1))
    for doc, hits in zip(docs, idx.scan(docs), strict=True):
        toks = tokenize(doc)
        expected = {
            (n, " ".join(toks[i : i + n]))
            for n, grams in naive.items()
            for i in range(len(toks) - n + 1)
            if " ".join(toks[i : i + n]) in grams
        }
        assert {(h.n, h.ngram) for h in hits} == expected
    assert any(h.n == 13 for h in idx.scan([docs[150]])[0])


def test_long_texts_hash_in_spans_like_short_ones() -> None:
    """A text longer than one hashing span gives the same token hashes as its pieces."""
    from afm.filters import ngram_index

    words = [f"tok{i % 997}é" for i in range(ngram_index._SPAN // 5)]
    long_text = " ".join(words)
    assert len(long_text) > ngram_index._SPAN
    batch = hash_tokens([long_text])
    assert batch.hashes.size == len(words)
    pieces = hash_tokens([" ".join(words[:10]), " ".join(words[-10:])])
    assert np.array_equal(batch.hashes[:10], pieces.hashes[:10])
    assert np.array_equal(batch.hashes[-10:], pieces.hashes[10:])
