"""Benchmarks of the quality stage: heuristic throughput, classifier throughput and accuracy.

Inputs: the 181 real article pages of ``../shared/eval/extraction``: each page's
ground-truth article body (a good document) and its boilerplate (the page's visible text
lines that are not part of the article: menus, teasers, footers; a bad document). Without
``../shared`` the shipped training texts of the default model stand in.

* ``quality_heuristics``: docs/s per core (process CPU time) of the Gopher + C4 + FineWeb
  rule set, next to the floor any per-document Python filter pays (lower-case + split of
  the same texts), next to the same rules with naive n-gram counting (a dict of word
  tuples per n), and, when ``datatrove`` is installed, datatrove's own four filters.
* ``quality_classifier``: docs/s per core of the default fastText model scoring in batches
  vs one predict call per document (the naive loop); and the accuracy of separating
  articles from boilerplate: the model (at its sidecar's threshold) vs the heuristic rules.
* ``math_code_filters``: docs/s per core of the math filter on GSM8K test solutions and of
  the code filter on HumanEval reference solutions (needs ``../shared``), vs the floor.
* ``quality_hf_scorer`` (needs the ``hf`` extra): docs/s of a Hugging Face quality model of
  FineWeb-Edu's classifier's shape (a BERT-base encoder with a one-output regression head,
  random weights, built from a config: nothing downloaded; ``--quick``: a 2-layer one)
  scored by afm's batched scorer (length-sorted batches of 32, on the GPU when present)
  vs one text per call (the naive loop), on the same device; and on a GPU, the largest
  gap between its bf16 scores and float32 scores on the CPU.
* ``quality_default_auc`` (needs ``../shared``): the shipped default vs the hand-written
  model it replaced, AUC of content over boilerplate on the ScrapingHub pages neither was
  trained on.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from afm.app.bench.common import BenchOptions, Comparison


def load_article_vs_boilerplate(eval_dir: Path, limit: int | None = None) -> tuple[list[str], list[str]]:
    """(article bodies, boilerplate texts) of the extraction benchmark pages."""
    import lxml.html

    root = eval_dir / "extraction"
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    good: list[str] = []
    bad: list[str] = []
    for page_id in sorted(truth)[:limit]:
        body = truth[page_id].get("articleBody") or ""
        path = root / "html" / f"{page_id}.html.gz"
        if not body.strip() or not path.is_file():
            continue
        good.append(body)
        page = lxml.html.fromstring(gzip.decompress(path.read_bytes()))
        for el in page.xpath("//script|//style|//noscript"):
            el.drop_tree()
        body_flat = " ".join(body.split())
        lines = (" ".join(line.split()) for line in page.text_content().splitlines())
        rest = [line for line in lines if line and line not in body_flat]
        text = "\n".join(rest)[:5000]
        if len(text) > 200:
            bad.append(text)
    return good, bad


def _inputs(opts: BenchOptions) -> tuple[list[str], list[str], str]:
    if opts.shared_dir is not None and (opts.shared_dir / "eval" / "extraction").is_dir():
        good, bad = load_article_vs_boilerplate(opts.shared_dir / "eval", 40 if opts.quick else None)
        return good, bad, "extraction-benchmark articles vs their boilerplate"
    data = resources.files("afm.filters").joinpath("data/quality/handwritten")

    def read(name: str) -> list[str]:
        return [json.loads(x)["text"] for x in (data / name).read_text().splitlines() if x.strip()]

    return read("train_positives.jsonl"), read("train_negatives.jsonl"), "shipped training texts"


def _docs_per_cpu_second(fn: Callable[[list[str]], object], texts: list[str], repeat: int) -> float:
    fn(texts[:5])  # warm-up (imports, model load)
    start = time.process_time()
    for _ in range(repeat):
        fn(texts)
    return repeat * len(texts) / max(time.process_time() - start, 1e-9)


def _naive_top(words: list[str], n: int) -> float:
    from collections import Counter

    total = sum(map(len, words))
    grams = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    if not total or not grams:
        return 0.0
    gram, count = max(grams.items(), key=lambda kv: (kv[1], sum(map(len, kv[0]))))
    return 0.0 if count < 2 else min(1.0, sum(map(len, gram)) * count / total)


def _naive_dup(words: list[str], n: int) -> float:
    from collections import Counter

    total = sum(map(len, words))
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    counts = Counter(grams)
    covered = [False] * len(words)
    for i, g in enumerate(grams):
        if counts[g] > 1:
            covered[i : i + n] = [True] * n
    return sum(len(w) for w, c in zip(words, covered) if c) / total if total else 0.0


def _naive_filter() -> object:
    """The same rules with the straightforward n-gram counting (a dict of word tuples per
    n, as reference implementations do) instead of the vectorised hashes."""
    from afm.filters.quality.rules import QualityHeuristicsFilter, _hi

    class Naive(QualityHeuristicsFilter):
        def _gopher_repetition(self, text, lowered):  # type: ignore[no-untyped-def]
            checks = super()._gopher_repetition(text, [])[:4]
            cfg = self.cfg
            for n, limit in sorted(cfg.top_ngram_max_frac.items()):
                checks.append((f"gopher_top_{n}gram", _naive_top(lowered, n), _hi(limit)))
            for n, limit in sorted(cfg.dup_ngram_max_frac.items()):
                checks.append((f"gopher_dup_{n}gram", _naive_dup(lowered, n), _hi(limit)))
            return checks

    return Naive()


def bench_heuristics(opts: BenchOptions) -> list[Comparison]:
    from afm.filters.quality.rules import QualityHeuristicsFilter
    from afm.schema import make_document

    good, bad, what = _inputs(opts)
    texts = good + bad
    docs = [make_document(t) for t in texts]
    flt = QualityHeuristicsFilter()
    repeat = 1 if opts.quick else 3

    def ours(_texts: list[str]) -> None:
        for d in docs:
            flt(d)

    def floor(ts: list[str]) -> None:
        for t in ts:
            t.lower().split()

    rows = [Comparison(
        metric=f"quality heuristics, {len(texts)} docs ({what})",
        ours=_docs_per_cpu_second(ours, texts, repeat),
        baseline=_docs_per_cpu_second(floor, texts, repeat),
        baseline_name="lower()+split() floor", unit="docs/s/core",
        goal="within ~100x of the floor")]
    naive = _naive_filter()

    def naive_run(_texts: list[str]) -> None:
        for d in docs:
            naive(d)  # type: ignore[operator]

    rows.append(Comparison(
        metric="quality heuristics vs the same rules with naive n-gram counting",
        ours=rows[0].ours, baseline=_docs_per_cpu_second(naive_run, texts, repeat),
        baseline_name="naive tuple counting", unit="docs/s/core", goal=">= 1x"))
    try:  # the field's reference implementation, when installed (pip install datatrove)
        from datatrove.data import Document as DTDocument
        from datatrove.pipeline.filters import (
            C4QualityFilter,
            FineWebQualityFilter,
            GopherQualityFilter,
            GopherRepetitionFilter,
        )

        dt_filters = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(),
                      FineWebQualityFilter()]

        def datatrove(ts: list[str]) -> None:
            for i, t in enumerate(ts):
                d = DTDocument(text=t, id=str(i))
                for f in dt_filters:
                    if f.filter(d) is not True:
                        break

        dt = _docs_per_cpu_second(datatrove, texts, repeat)
        rows.append(Comparison(metric="quality heuristics vs datatrove's four filters",
                               ours=rows[0].ours, baseline=dt, baseline_name="datatrove",
                               unit="docs/s/core", goal=">= 1x"))
    except Exception:  # noqa: BLE001 - optional baseline (not installed / needs NLTK data)
        pass
    return rows


def bench_classifier(opts: BenchOptions) -> list[Comparison]:
    from afm.filters.quality.model import QualityClassifierFilter
    from afm.filters.quality.rules import QualityHeuristicsFilter
    from afm.schema import make_document

    good, bad, what = _inputs(opts)
    texts = good + bad
    flt = QualityClassifierFilter()
    clf = flt.classifier
    repeat = 2 if opts.quick else 10

    def batched(ts: list[str]) -> None:
        clf.score(ts)

    def one_by_one(ts: list[str]) -> None:
        for t in ts:
            clf.score_one(t)

    scores = clf.score(texts)
    truth = [True] * len(good) + [False] * len(bad)
    model_acc = sum((s >= flt.threshold) == t for s, t in zip(scores, truth)) / len(texts)
    heur = QualityHeuristicsFilter()
    heur_acc = sum(heur(make_document(x)).keep == t for x, t in zip(texts, truth)) / len(texts)
    return [
        Comparison(metric=f"quality model scoring, {len(texts)} docs ({what})",
                   ours=_docs_per_cpu_second(batched, texts, repeat),
                   baseline=_docs_per_cpu_second(one_by_one, texts, repeat),
                   baseline_name="one predict() per doc", unit="docs/s/core", goal=">= 1x"),
        Comparison(metric=f"article vs boilerplate accuracy ({len(good)}+{len(bad)}, model at its "
                          f"threshold {flt.threshold:.2f})",
                   ours=model_acc, baseline=heur_acc, baseline_name="heuristic rules",
                   unit="accuracy", goal="report"),
    ]


def bench_math_code(opts: BenchOptions) -> list[Comparison]:
    """docs/s per core of the math filter (GSM8K test solutions + news articles) and the
    code filter (HumanEval reference solutions), next to the lower()+split() floor."""
    from afm.filters.code import CodeFilter
    from afm.filters.math import MathFilter
    from afm.schema import make_document

    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval (GSM8K and HumanEval test sets)")
    bench_dir = opts.shared_dir / "eval" / "benchmarks"
    limit = 200 if opts.quick else None

    def rows_of(name: str) -> list[dict]:
        with gzip.open(bench_dir / name, "rt", encoding="utf-8") as fh:
            return [json.loads(x) for x in fh][:limit]

    math_texts = [r["question"] + "\n" + r["answer"] for r in rows_of("gsm8k-test.jsonl.gz")]
    math_docs = [make_document(t, source="math") for t in math_texts]
    code_texts = [r["prompt"] + r["canonical_solution"] for r in rows_of("humaneval.jsonl.gz")]
    code_docs = []
    for i, t in enumerate(code_texts):
        d = make_document(t, source="code", title=f"task_{i}.py")
        d["license"] = "MIT"  # type: ignore[typeddict-unknown-key]
        code_docs.append(d)
    mf, cf = MathFilter(), CodeFilter()
    repeat = 1 if opts.quick else 5

    def floor(ts: list[str]) -> None:
        for t in ts:
            t.lower().split()

    def run_math(_ts: list[str]) -> None:
        for d in math_docs:
            mf(d)

    def run_code(_ts: list[str]) -> None:
        for d in code_docs:
            cf(d)

    return [
        Comparison(metric=f"math filter (tags+symbols), {len(math_docs)} GSM8K solutions",
                   ours=_docs_per_cpu_second(run_math, math_texts, repeat),
                   baseline=_docs_per_cpu_second(floor, math_texts, repeat),
                   baseline_name="lower()+split() floor", unit="docs/s/core", goal="report"),
        Comparison(metric=f"code filter (licence+heuristics+secrets), {len(code_docs)} HumanEval",
                   ours=_docs_per_cpu_second(run_code, code_texts, repeat),
                   baseline=_docs_per_cpu_second(floor, code_texts, repeat),
                   baseline_name="lower()+split() floor", unit="docs/s/core", goal="report"),
    ]


def fineweb_edu_shaped_model(path: Path, texts: list[str], *, layers: int = 12, hidden: int = 768) -> Path:
    """A BERT encoder with a one-output regression head (the shape of FineWeb-Edu's
    classifier, an embedding model with a regression head), random weights, and a
    word-piece vocabulary over ``texts``: built from a config, nothing downloaded."""
    import re

    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})[:30_000]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizer(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
                     max_position_embeddings=512, num_labels=1, problem_type="regression")
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def bench_hf_scorer(opts: BenchOptions) -> list[Comparison]:
    """Batched Hugging Face scoring vs one text per call, same model, same device."""
    import tempfile

    import torch

    from afm.filters.quality.scorers import HFQualityScorer

    good, bad, what = _inputs(opts)
    # A BERT-base pass over 512 tokens is GPU work: on a CPU the full run scores fewer texts.
    n = 64 if opts.quick else (512 if torch.cuda.is_available() else 96)
    texts = [t for pair in zip(good, bad) for t in pair][:n]  # both kinds, whatever n is
    with tempfile.TemporaryDirectory(prefix="afm-bench-hf-") as tmp:
        model = fineweb_edu_shaped_model(Path(tmp) / "m", good + bad, **({"layers": 2, "hidden": 128}
                                                                        if opts.quick else {}))
        batched = HFQualityScorer(str(model), batch_size=32)
        device = batched.device
        batched.score(texts[:8])  # warm-up (kernels, allocator)
        start = time.perf_counter()
        scores = batched.score(texts)
        ours = len(texts) / (time.perf_counter() - start)
        one = HFQualityScorer(str(model), batch_size=1, device=device)
        naive_texts = texts[: max(16, len(texts) // 4)]
        start = time.perf_counter()
        for t in naive_texts:
            one.score([t])
        naive = len(naive_texts) / (time.perf_counter() - start)
        rows = [Comparison(metric=f"HF quality model (BERT {'2x128' if opts.quick else 'base'}, regression head) "
                                  f"on {device}, {len(texts)} docs ({what})",
                           ours=ours, baseline=naive, baseline_name="one text per call",
                           unit="docs/s", goal=">= 1x")]
        if device.startswith("cuda"):
            import numpy as np

            cpu = HFQualityScorer(str(model), batch_size=32, device="cpu", dtype="float32")
            ref = cpu.score(texts[:64])
            gap = float(np.max(np.abs(np.asarray(scores[:64]) - ref)))
            rows.append(Comparison(metric="largest |GPU bf16 - CPU float32| score gap, 64 docs", ours=gap,
                                   unit="score", goal="report"))
    return rows


def bench_default_auc(opts: BenchOptions) -> list[Comparison]:
    """The shipped default vs the hand-written model, on pages neither was trained on."""
    from afm.filters.quality.eval import compare_models, real_page_sets
    from afm.filters.quality.model import DATA_DIR, QualityClassifierFilter, QualityModelConfig

    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval (the ScrapingHub pages)")
    items = real_page_sets(scrapinghub=str(opts.shared_dir / "eval"))["scrapinghub"]
    new = QualityClassifierFilter()
    old = QualityClassifierFilter(QualityModelConfig(
        model_path=str(DATA_DIR / "handwritten" / "quality_handwritten.ftz")))
    rows = compare_models({"new": new.score_texts, "old": old.score_texts}, items, set_name="scrapinghub",
                          n_boot=300 if opts.quick else 2000)
    return [Comparison(metric=f"content vs boilerplate AUC, {rows[0].n_pos}+{rows[0].n_neg} ScrapingHub texts "
                              f"(difference {rows[1].delta_vs_first:+.3f}, paired SE {rows[1].delta_se:.3f})",
                       ours=rows[0].auc, baseline=rows[1].auc, baseline_name="hand-written model",
                       unit="AUC", goal="> baseline")]


BENCHMARKS = {
    "quality_heuristics": bench_heuristics,
    "quality_classifier": bench_classifier,
    "math_code_filters": bench_math_code,
    "quality_hf_scorer": bench_hf_scorer,
    "quality_default_auc": bench_default_auc,
}
