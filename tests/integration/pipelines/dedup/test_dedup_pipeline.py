"""FuzzyDedup end to end on Beam's local runner: what is kept, what is rejected and why."""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest

from afm.filters.minhash import shingle_jaccard
from afm.pipelines.dedup.pipeline import DedupConfig, dedup_records
from afm.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, make_document

WORDS = [f"w{i}" for i in range(20000)]


def text(rng: random.Random, n: int = 300) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def replace_span(t: str, start: int, length: int, rng: random.Random) -> str:
    words = t.split()
    words[start : start + length] = rng.choices(WORDS, k=length)
    return " ".join(words)


def details(reject: dict) -> dict:
    return json.loads(reject["details"])


def check_accounting(docs: list[dict], kept: list[dict], rejected: list[dict], accepted: set[str] = frozenset()) -> None:
    """Documents in = kept + rejected; every reject points at a kept (or accepted) document."""
    assert len(kept) + len(rejected) == len(docs)
    assert sorted(d["url"] for d in docs) == sorted(d["url"] for d in kept + rejected)
    kept_ids = {d["id"] for d in kept} | set(accepted)
    for r in rejected:
        if r["reason"] != "invalid_document":
            assert details(r)["duplicate_of"] in kept_ids
            assert r["dup_cluster"] == details(r)["cluster"]
    for d in kept:
        assert d["dup_cluster"] is not None
    # The records fit the shared schemas (what every writer uses).
    from afm.schema import to_table

    to_table(kept, DOCUMENT_SCHEMA)
    to_table(rejected, REJECT_SCHEMA)


@pytest.fixture(scope="module")
def corpus() -> dict[str, dict]:
    rng = random.Random(7)
    docs: dict[str, dict] = {}

    def add(name: str, body: str, quality: float | None = None) -> None:
        docs[name] = make_document(body, url=f"https://example.org/{name}", quality_score=quality)

    base = text(rng, 300)
    add("exact_a", base, 0.2)
    add("exact_b", base.upper().replace(" ", "  "), 0.9)  # same after normalisation, better
    add("exact_c", base + " !!!", 0.1)

    page = text(rng, 400)
    add("near_keep", page, 0.8)
    add("near_dup", replace_span(page, 100, 6, rng), 0.3)  # J ~ 0.95

    negative = text(rng, 400)
    add("neg_a", negative, 0.5)
    add("neg_b", replace_span(negative, 200, 58, rng), 0.5)  # J ~ 0.73: just below

    middle = text(rng, 400)
    add("chain_b", middle, 0.1)
    add("chain_a", replace_span(middle, 0, 25, rng), 0.2)  # J(a, b) ~ 0.88
    add("chain_c", replace_span(middle, 375, 25, rng), 0.9)  # J(a, c) ~ 0.78

    add("empty_a", "")
    add("empty_b", "")
    add("punct_only", "... !!! ???")
    add("tiny_a", "Hello there")
    add("tiny_b", "hello, THERE!")
    add("tiny_c", "hello there friend")
    for i in range(5):
        add(f"unique_{i}", text(rng, 200))
    return docs


@pytest.fixture(scope="module")
def result(corpus: dict[str, dict]) -> tuple[dict, dict, dict]:
    extra = [
        dict(corpus["unique_0"]),  # the very same record twice (same id, same text)
        {**make_document("x", url="https://example.org/bad"), "text": None},  # invalid
    ]
    docs = list(corpus.values()) + extra
    kept, rejected, metrics = dedup_records(docs, DedupConfig())
    check_accounting(docs, kept, rejected)
    by_url = {d["url"].rsplit("/", 1)[1]: d for d in kept}
    rej_by_url: dict[str, list] = {}
    for r in rejected:
        rej_by_url.setdefault(r["url"].rsplit("/", 1)[1], []).append(r)
    return by_url, rej_by_url, metrics


def test_exact_duplicates_keep_highest_quality(result, corpus) -> None:
    kept, rejected, _ = result
    assert "exact_b" in kept and "exact_a" not in kept and "exact_c" not in kept
    for name in ("exact_a", "exact_c"):
        (r,) = rejected[name]
        assert r["reason"] == "exact_duplicate" and r["rejected_by"] == "dedup"
        assert details(r)["duplicate_of"] == corpus["exact_b"]["id"]
    assert kept["exact_b"]["signals"]["dedup.cluster_size"] == 3.0


def test_near_duplicate_above_threshold_rejected(result, corpus) -> None:
    kept, rejected, _ = result
    assert shingle_jaccard(corpus["near_keep"]["text"], corpus["near_dup"]["text"]) > 0.9
    assert "near_keep" in kept
    (r,) = rejected["near_dup"]
    assert r["reason"] == "near_duplicate"
    assert details(r) == {"duplicate_of": corpus["near_keep"]["id"], "cluster": corpus["near_keep"]["id"]}


def test_hard_negative_just_below_threshold_kept(result, corpus) -> None:
    kept, _, _ = result
    similarity = shingle_jaccard(corpus["neg_a"]["text"], corpus["neg_b"]["text"])
    assert 0.7 < similarity < 0.76
    assert "neg_a" in kept and "neg_b" in kept
    assert kept["neg_a"]["dup_cluster"] != kept["neg_b"]["dup_cluster"]


def test_chain_forms_one_cluster(result, corpus) -> None:
    kept, rejected, _ = result
    t = {k: corpus[k]["text"] for k in ("chain_a", "chain_b", "chain_c")}
    assert shingle_jaccard(t["chain_a"], t["chain_b"]) > 0.85
    assert shingle_jaccard(t["chain_b"], t["chain_c"]) > 0.85
    assert shingle_jaccard(t["chain_a"], t["chain_c"]) < 0.8  # A and C: not duplicates
    assert "chain_c" in kept  # highest quality of the component wins
    for name in ("chain_a", "chain_b"):
        (r,) = rejected[name]
        assert details(r)["cluster"] == corpus["chain_c"]["id"]
    assert kept["chain_c"]["signals"]["dedup.cluster_size"] == 3.0


def test_empty_tiny_invalid_and_repeated_records(result, corpus) -> None:
    kept, rejected, metrics = result
    # Wordless documents are not dedup's business: kept, never clustered.
    for name in ("empty_a", "empty_b", "punct_only"):
        assert kept[name]["dup_cluster"] == corpus[name]["id"]
    # Tiny documents are exact duplicates after normalisation, and nothing more.
    (winner,) = {"tiny_a", "tiny_b"} & set(kept)  # equal quality: the smaller id wins
    (loser,) = {"tiny_a", "tiny_b"} - {winner}
    assert corpus[winner]["id"] < corpus[loser]["id"]
    assert rejected[loser][0]["reason"] == "exact_duplicate"
    assert "tiny_c" in kept
    assert rejected["bad"][0]["reason"] == "invalid_document"
    # The same record twice: one kept, one exact duplicate of it.
    (dup,) = rejected["unique_0"]
    assert dup["reason"] == "exact_duplicate" and details(dup)["duplicate_of"] == kept["unique_0"]["id"]
    assert metrics["documents_without_words"] == 3
    assert metrics.get("cc_unsettled_after_max_rounds", 0) == 0


def test_thousands_of_copies_of_one_page_linear() -> None:
    rng = random.Random(11)
    page = text(rng, 300)
    docs = [make_document(page, url=f"https://copies.example/{i}") for i in range(1500)]
    docs += [
        make_document(f"{page} visit {i} of {rng.random()}", url=f"https://near.example/{i}", quality_score=i / 3000)
        for i in range(1500)
    ]
    kept, rejected, metrics = dedup_records(docs, DedupConfig())
    check_accounting(docs, kept, rejected)
    assert len(kept) == 1 and kept[0]["url"] == "https://near.example/1499"  # best quality
    assert kept[0]["signals"]["dedup.cluster_size"] == 3000.0
    # Star linking: at most one candidate edge per member per band, never ~n^2/2.
    bands = DedupConfig().lsh()[0]
    assert metrics["candidate_edges"] <= 1500 * bands
    assert metrics.get("cc_unsettled_after_max_rounds", 0) == 0


def test_incremental_against_accepted_index(tmp_path) -> None:
    rng = random.Random(5)
    index = tmp_path / "index"
    week1 = [make_document(text(rng, 200), url=f"https://w1.example/{i}", quality_score=0.1) for i in range(30)]
    cfg = DedupConfig(index_dir=str(index), write_index=True)
    kept1, rejected1, _ = dedup_records(week1, cfg)
    assert len(kept1) == 30 and not rejected1
    from afm.pipelines.dedup.pipeline import index_files

    parts = index_files(str(index))  # committed in one batch-* directory per run
    assert len(parts) >= 1 and (index / "_index.json").exists()
    assert not list(index.glob(".staging-*"))
    assert sum(pq.read_metadata(p).num_rows for p in parts) == 30

    fresh = text(rng, 200)
    week2 = [
        make_document(week1[0]["text"], url="https://w2.example/copy", quality_score=1.0),
        make_document(replace_span(week1[1]["text"], 50, 3, rng), url="https://w2.example/near", quality_score=1.0),
        make_document(fresh, url="https://w2.example/fresh"),
        make_document(fresh + " and more", url="https://w2.example/fresh2", quality_score=0.5),
    ]
    kept2, rejected2, _ = dedup_records(week2, cfg)
    check_accounting(week2, kept2, rejected2, accepted={d["id"] for d in week1})
    by_url = {r["url"]: r for r in rejected2}
    # Accepted documents always win, whatever the new quality scores say.
    assert by_url["https://w2.example/copy"]["reason"] == "exact_duplicate"
    assert details(by_url["https://w2.example/copy"])["duplicate_of"] == week1[0]["id"]
    assert details(by_url["https://w2.example/near"])["duplicate_of"] == week1[1]["id"]
    assert [d["url"] for d in kept2] == ["https://w2.example/fresh2"]

    # Week 3 sees week 2's kept document through the updated index.
    kept3, rejected3, _ = dedup_records([make_document(fresh + " and more", url="https://w3.example/again")],
                                        DedupConfig(index_dir=str(index)))
    assert not kept3 and details(rejected3[0])["duplicate_of"] == kept2[0]["id"]

    with pytest.raises(ValueError, match="other parameters"):
        dedup_records(week2, DedupConfig(index_dir=str(index), num_perm=64))


def test_same_record_twice_with_different_scores_keeps_the_better_one():
    """A re-crawled page (same id, same text) seen with two quality scores: one copy is
    kept (the better), the other rejected as its exact duplicate; nothing is lost."""
    from afm.pipelines.dedup.pipeline import DedupConfig, dedup_records
    from afm.schema import make_document

    text = "the same page crawled twice with the same words in the same order " * 5
    low = make_document(text, id="x1", quality_score=0.5)
    high = make_document(text, id="x1", quality_score=0.9)
    kept, rejected, _ = dedup_records([low, high], DedupConfig())
    assert [d["quality_score"] for d in kept] == [0.9]
    assert len(rejected) == 1 and rejected[0]["reason"] == "exact_duplicate"
    assert rejected[0]["quality_score"] == 0.5


def test_with_a_spill_folder_rejects_leave_with_their_texts_on_disk(corpus, tmp_path) -> None:
    """In a curate run the rejects cross a flatten after the final join: their texts wait in
    the spill folder (a local run's launcher would otherwise hold every rejected text at
    once), and restoring them gives the texts back; kept documents come out restored."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that

    from afm.pipelines.beam.spill import is_stowed, restore_all
    from afm.pipelines.dedup.pipeline import FuzzyDedup

    texts = {d["id"]: d["text"] for d in corpus.values()}
    spill_dir = str(tmp_path / ".spill" / "dedup")

    def rejects_stowed(rejects: list[dict]) -> None:
        long_ones = [r for r in rejects if len(texts[r["id"]]) > 1000]
        assert long_ones and all(is_stowed(r) for r in long_ones)
        assert {r["id"]: r["text"] for r in restore_all(rejects)} == {r["id"]: texts[r["id"]] for r in rejects}

    def kept_restored(kept: list[dict]) -> None:
        assert kept and not any(is_stowed(d) for d in kept)
        assert all(d["text"] == texts[d["id"]] for d in kept)

    with beam.Pipeline(options=beam.options.pipeline_options.PipelineOptions(
            ["--direct_running_mode=in_memory", "--direct_num_workers=1"])) as pipeline:
        out = pipeline | beam.Create(list(corpus.values())) | FuzzyDedup(DedupConfig(), spill_dir=spill_dir)
        assert_that(out["rejected"], rejects_stowed, label="rejects")
        assert_that(out["kept"], kept_restored, label="kept")
