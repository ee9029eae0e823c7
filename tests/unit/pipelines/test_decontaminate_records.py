"""The two-pass decision (plain Python API): planted questions are caught, the common-usage
threshold excuses n-grams held by >= threshold documents, every document is accounted for."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from afm.filters.benchmarks import BenchmarkSpec, build_index, demo_benchmark_specs
from afm.filters.ngram_index import normalize_text
from afm.pipelines.decontaminate import DecontamConfig, decontaminate_records
from afm.schema import make_document

ARTICLE = (
    "Local news. The farmers' market opened again this weekend with more stalls than ever. "
    "{planted} Visitors said the prices were fair and the weather held up all day."
)
FILLER = [
    "A quiet street with old trees and a small bakery on the corner.",
    "The council met on Tuesday to discuss the new cycling lanes downtown.",
]


def _variants(question: str) -> list[str]:
    """The question as copied, upper-cased, with its punctuation changed and re-wrapped."""
    words = question.split()
    rewrapped = "\n".join(" ".join(words[i : i + 5]) for i in range(0, len(words), 5))
    repunct = question.replace(".", " ;").replace(",", " -").replace("?", "!!")
    return [question, question.upper(), repunct, rewrapped, f"<p>{question.lower()}</p>"]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("decontam") / "demo-index"
    build_index(demo_benchmark_specs(), out)
    return str(out)


def _docs(texts: list[str]) -> list[dict]:
    return [make_document(t, url=f"https://example.org/{i}") for i, t in enumerate(texts)]


def _check_planted(index: str, question: str, benchmark: str, example_id: str) -> None:
    texts = [ARTICLE.format(planted=v) for v in _variants(question)] + FILLER
    docs = _docs(texts)
    kept, rejects, report = decontaminate_records(docs, DecontamConfig(index=index))
    assert {d["url"] for d in kept} == {docs[-2]["url"], docs[-1]["url"]}
    assert len(rejects) == len(texts) - 2
    for rej in rejects:
        assert rej["rejected_by"] == "decontaminate" and rej["reason"] == "benchmark_overlap"
        details = json.loads(rej["details"])
        assert details["benchmark"] == benchmark and details["example_id"] == example_id
        assert details["ngram"] in normalize_text(question)
        assert rej["text"] in texts  # the document itself is kept whole in the reject
    assert report["benchmarks"][benchmark]["documents_removed"] == len(texts) - 2
    assert report["documents_in"] == len(kept) + len(rejects)


def test_planted_demo_question_is_caught(demo_index: str) -> None:
    rows = [json.loads(line) for line in open(demo_benchmark_specs()[0].path, encoding="utf-8")]
    _check_planted(demo_index, rows[4]["question"], "demo-math", "4")


def test_planted_gsm8k_question_is_caught(shared_eval: Path, tmp_path: Path) -> None:
    path = shared_eval / "benchmarks" / "gsm8k-test.jsonl.gz"
    build_index([BenchmarkSpec("gsm8k", str(path), adapter="gsm8k")], tmp_path / "idx")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    _check_planted(str(tmp_path / "idx"), rows[100]["question"], "gsm8k", "100")


def _threshold_run(index: str, copies: int, threshold: int) -> tuple[int, int, dict]:
    """``copies`` documents share one benchmark 13-gram (a fragment, not the question)."""
    rows = [json.loads(line) for line in open(demo_benchmark_specs()[0].path, encoding="utf-8")]
    fragment = " ".join(rows[9]["question"].split()[:13])
    docs = _docs([f"Doc {i}: {fragment} and then something else {i}." for i in range(copies)])
    docs += _docs(FILLER)
    kept, rejects, report = decontaminate_records(docs, DecontamConfig(index=index, threshold=threshold))
    assert len(kept) + len(rejects) == len(docs)
    return len(kept) - len(FILLER), len(rejects), report


def test_threshold_small(demo_index: str) -> None:
    assert _threshold_run(demo_index, copies=5, threshold=5)[:2] == (5, 0)  # common usage
    assert _threshold_run(demo_index, copies=4, threshold=5)[:2] == (0, 4)  # threshold - 1


def test_threshold_1000_on_synthetic_corpus(demo_index: str) -> None:
    kept, rejected, report = _threshold_run(demo_index, copies=1000, threshold=1000)
    assert (kept, rejected) == (1000, 0)
    excused = report["benchmarks"]["demo-math"]["excused_as_common"]
    assert excused and excused[0]["documents"] == 1000
    kept, rejected, report = _threshold_run(demo_index, copies=999, threshold=1000)
    assert (kept, rejected) == (0, 999)
    assert report["benchmarks"]["demo-math"]["top_colliding"][0]["documents"] == 999


def test_one_rare_ngram_is_enough(demo_index: str) -> None:
    """A document holding a common n-gram AND a rare one is dropped for the rare one."""
    rows = [json.loads(line) for line in open(demo_benchmark_specs()[0].path, encoding="utf-8")]
    common = " ".join(rows[9]["question"].split()[:13])
    rare = rows[12]["question"]
    docs = _docs([f"{common} filler {i}" for i in range(3)] + [f"{common}. Also: {rare}"])
    kept, rejects, _ = decontaminate_records(docs, DecontamConfig(index=demo_index, threshold=3))
    assert len(kept) == 3 and len(rejects) == 1
    details = json.loads(rejects[0]["details"])
    assert details["example_id"] == "12" and details["excused_ngrams"] == 1


def test_non_ascii_benchmark_and_documents(tmp_path: Path) -> None:
    bench = tmp_path / "multi.jsonl"
    rows = [
        {"question": "Wie viele Äpfel hat Jürgen, wenn er fünf Äpfel kauft und zwei isst?", "answer": "3"},
        {"question": "Сколько яблок осталось у Маши после того, как она съела два яблока?", "answer": "2"},
        {"question": "राम के पास पाँच आम हैं और वह दो आम खा लेता है तो कितने बचे", "answer": "3"},
    ]
    bench.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    build_index([BenchmarkSpec("multi", str(bench), adapter="gsm8k", n=6)], tmp_path / "idx")
    texts = [
        "Forum: WIE VIELE ÄPFEL HAT JÜRGEN, wenn er ﬁve… nein: fünf Äpfel kauft",  # upper-case umlauts
        "Задача дня — сколько яблок осталось у Маши после того как она съела",
        "प्रश्न: राम के पास पाँच आम हैं और",
        "Ｗｉｅ ｖｉｅｌｅ Äｐｆｅｌ ｈａｔ Ｊüｒｇｅｎ ｗｅｎｎ",  # full-width forms (NFKC)
        "Wie viele Birnen hat Jürgen heute?",
    ]
    kept, rejects, _ = decontaminate_records(_docs(texts), DecontamConfig(index=str(tmp_path / "idx")))
    assert [r["text"] for r in rejects] == texts[:4]
    assert [d["text"] for d in kept] == texts[4:]


def test_invalid_records_are_rejected_not_lost(demo_index: str) -> None:
    docs = _docs(FILLER) + [{"id": "broken", "source": "web", "text": None}]
    kept, rejects, report = decontaminate_records(docs, DecontamConfig(index=demo_index))
    assert len(kept) == 2 and [r["reason"] for r in rejects] == ["invalid_document"]
    assert report["documents_invalid"] == 1 and report["documents_in"] == 3


def test_missing_index_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build-index"):
        decontaminate_records([], DecontamConfig(index=str(tmp_path / "nope")))


def test_no_silent_default_benchmarks(tmp_path: Path) -> None:
    """Issue 13: without an index or named benchmarks, nothing is checked against the demo
    set pretending to be a decontamination; it is an error that says how to build one."""
    with pytest.raises(ValueError, match="build-index"):
        decontaminate_records([], DecontamConfig(cache_dir=str(tmp_path / "cache")))


def test_named_benchmarks_are_indexed_on_the_fly(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in open(demo_benchmark_specs()[0].path, encoding="utf-8")]
    cfg = DecontamConfig(benchmarks="demo", cache_dir=str(tmp_path / "cache"))
    kept, rejects, _ = decontaminate_records(_docs([rows[0]["question"], FILLER[0]]), cfg)
    assert len(kept) == 1 and len(rejects) == 1
    assert list((tmp_path / "cache").iterdir())  # index cached for the next run


@pytest.mark.parametrize("threshold", [1, 0, -5, True, 2.5])
def test_threshold_below_two_is_an_error(threshold: object) -> None:
    """Issue 13: ``--threshold 1`` made every n-gram "common usage" (each is in the one
    document that holds it), silently turning decontamination off."""
    with pytest.raises(ValueError, match=">= 2"):
        DecontamConfig(benchmarks="demo", threshold=threshold)  # type: ignore[arg-type]
