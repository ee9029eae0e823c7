"""Benchmarks of de-duplication: signature speed, detection quality, end-to-end throughput.

* ``dedup_signatures``: MinHash signatures per second on one core, from raw 300-word texts
  (normalisation and shingling included) with 128 permutations, next to datasketch's
  ``update_batch``, ``MinHash.bulk`` and ``update`` given the shingles already made
  (so the baseline does strictly less work). Also checks that our signatures equal
  datasketch's own ``update_batch`` with the same shingle hash, bit for bit.
* ``dedup_quality``: a labelled set built from real text (the extraction benchmark's
  ground-truth articles in ``../shared``, else the docstrings of Python's standard
  library): every base document gets variants with word edits, boilerplate added,
  truncation, paragraph reordering, and exact re-formatted copies. The truth of a pair is
  its exact 5-gram Jaccard >= 0.8. Precision/recall of our pair decision (shares an LSH
  band and signature Jaccard >= 0.8) next to datasketch ``MinHashLSH(threshold=0.8)``
  candidates (its default weights), plus cluster-level precision/recall of the full Beam
  transform against the true duplicate components.
* ``dedup_end_to_end``: ``FuzzyDedup`` on Beam's local runner over 100k documents (10k
  with ``--quick``), 30% near/exact duplicates: docs/s and peak memory, next to an
  in-memory single-process datasketch ``MinHashLSH`` dedup of the same corpus. Each side
  runs in its own fresh process so its peak RSS is its own.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import re
import subprocess
import sys
import sysconfig
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison

BOILERPLATE = [
    "Home | News | Sport | Business | Culture | Contact us | Sign in",
    "Skip to main content. Menu. Search. Subscribe to our newsletter for the latest updates.",
    "We use cookies to improve your experience on our site. By continuing you accept our use of cookies.",
    "Share this article: Facebook Twitter LinkedIn Email. Print this page.",
    "Copyright 2024 All rights reserved. Terms of use. Privacy policy. Accessibility statement.",
    "Related articles. Most popular. Recommended for you. Advertisement.",
]


# -------------------------------------------------------------------------- real text


def real_texts(shared_dir: Path | None) -> tuple[list[str], str]:
    """Real prose: the extraction benchmark's article bodies, else stdlib docstrings."""
    if shared_dir is not None:
        path = Path(shared_dir) / "eval" / "extraction" / "ground-truth.json"
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            texts = [v.get("articleBody") or "" for v in data.values()]
            return [t for t in texts if len(t.split()) >= 60], "extraction ground-truth articles"
    return stdlib_docstrings(), "Python stdlib docstrings"


def stdlib_docstrings(limit_files: int = 400) -> list[str]:
    """Module/class/function docstrings of the standard library, one text per module."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for path in sorted(root.glob("*.py"))[:limit_files]:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        docs = [ast.get_docstring(n) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        text = "\n\n".join(d for d in docs if d)
        if len(text.split()) >= 60:
            texts.append(text)
    return texts


def word_pool(texts: list[str]) -> list[str]:
    return [w for t in texts for w in t.split()]


# ------------------------------------------------------------------ 1. signature speed


def _best_rate(fn, n_docs: int, repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return n_docs / max(best, 1e-9)


def bench_signatures(opts: BenchOptions) -> list[Comparison]:
    import numpy as np
    from datasketch import MinHash

    from afm.filters.minhash import MinHasher, shingles

    texts, _source = real_texts(opts.shared_dir)
    pool = word_pool(texts)
    rng = random.Random(0)
    n_docs = 500 if opts.quick else 2000
    docs = []
    for _ in range(n_docs):
        start = rng.randrange(0, max(1, len(pool) - 300))
        docs.append(" ".join(pool[start : start + 300]))
    hasher = MinHasher(num_perm=128, seed=1, ngram=5)

    def ours() -> None:
        for i in range(0, len(docs), 256):
            hasher.sketch(docs[i : i + 256])

    ours_rate = _best_rate(ours, len(docs))
    n_base = 200 if opts.quick else 500
    shingled = [shingles(d, 5) for d in docs[:n_base]]

    def update_batch() -> None:
        for s in shingled:
            MinHash(num_perm=128, seed=1).update_batch(s)

    def bulk() -> None:
        MinHash.bulk(shingled, num_perm=128, seed=1)

    def update() -> None:
        for s in shingled[:100]:
            m = MinHash(num_perm=128, seed=1)
            for x in s:
                m.update(x)

    batch_rate = _best_rate(update_batch, len(shingled))
    bulk_rate = _best_rate(bulk, len(shingled))
    update_rate = _best_rate(update, min(100, len(shingled)), repeat=1)
    sigs = hasher.signatures(docs[:50])
    same = np.mean([np.array_equal(hasher.datasketch_minhash(d).hashvalues, s) for d, s in zip(docs[:50], sigs)])
    unit = "docs/s/core"
    return [
        Comparison("signatures (raw text in)", ours_rate, batch_rate, "datasketch update_batch", unit, ">= 5x"),
        Comparison("signatures (raw text in)", ours_rate, bulk_rate, "datasketch MinHash.bulk", unit),
        Comparison("signatures (raw text in)", ours_rate, update_rate, "datasketch update", unit),
        Comparison("bit-identical to datasketch", float(same), 1.0, "datasketch, same hashfunc", "fraction", "1.0"),
    ]


# ---------------------------------------------------------------------- 2. quality


def _paragraphs(text: str, rng: random.Random) -> list[str]:
    paras = [p for p in re.split(r"\n\s*\n|\n", text) if p.strip()]
    if len(paras) < 3:  # no paragraph structure: cut into sentence blocks
        sentences = re.split(r"(?<=[.!?])\s+", text)
        size = max(1, len(sentences) // 4)
        paras = [" ".join(sentences[i : i + size]) for i in range(0, len(sentences), size)]
    return paras


def make_variant(text: str, rng: random.Random, pool: list[str]) -> tuple[str, str]:
    """One derived document and the name of what was done to it."""
    words = text.split()
    kind = rng.choice(["edit", "edit", "boilerplate", "truncate", "reorder", "copy", "combo"])
    if kind == "copy":  # same text after normalisation: case, spacing, punctuation
        return text.upper().replace(" ", "  ") + " .", kind
    if kind == "edit" or kind == "combo":
        n = max(1, int(len(words) * rng.uniform(0.005, 0.08)))
        for _ in range(n):
            op = rng.random()
            i = rng.randrange(len(words))
            if op < 0.5:
                words[i] = rng.choice(pool)
            elif op < 0.75:
                words.insert(i, rng.choice(pool))
            elif len(words) > 10:
                del words[i]
        text = " ".join(words)
        if kind == "edit":
            return text, kind
    if kind == "boilerplate" or kind == "combo":
        head = " ".join(rng.sample(BOILERPLATE, rng.randint(1, 2)))
        tail = " ".join(rng.sample(BOILERPLATE, rng.randint(0, 2)))
        return f"{head}\n{text}\n{tail}", kind
    if kind == "truncate":
        keep = rng.uniform(0.7, 0.98)
        return " ".join(words[: max(5, int(len(words) * keep))]), kind
    paras = _paragraphs(text, rng)  # reorder: move one block elsewhere
    if len(paras) >= 2:
        block = paras.pop(rng.randrange(len(paras)))
        paras.insert(rng.randrange(len(paras) + 1), block)
    return "\n\n".join(paras), kind


def labelled_set(opts: BenchOptions, seed: int = 0) -> tuple[list[dict[str, Any]], str]:
    """Documents (id, text, family, kind) from real text with derived near-duplicates."""
    from afm.schema import make_document

    texts, source = real_texts(opts.shared_dir)
    rng = random.Random(seed)
    pool = word_pool(texts)
    bases = [" ".join(t.split(" ")[:500]) if len(t.split()) > 500 else t for t in texts]
    if opts.quick:
        bases = bases[:60]
    docs = []
    for fam, base in enumerate(bases):
        docs.append(make_document(base, url=f"bench://{fam}/base", quality_score=rng.random()))
        for v in range(rng.randint(0, 4)):
            text, kind = make_variant(base, rng, pool)
            docs.append(make_document(text, url=f"bench://{fam}/{v}-{kind}", quality_score=rng.random()))
    return docs, source


def true_pairs(texts: list[str], threshold: float, ngram: int = 5) -> tuple[set[tuple[int, int]], dict]:
    """Pairs with exact shingle Jaccard >= threshold (inverted index: only pairs sharing
    a shingle are compared), and every compared pair's Jaccard."""
    from afm.filters.minhash import shingles

    sets = [set(shingles(t, ngram)) for t in texts]
    index: dict[bytes, list[int]] = defaultdict(list)
    for i, s in enumerate(sets):
        for sh in s:
            index[sh].append(i)
    candidates: set[tuple[int, int]] = set()
    for members in index.values():
        if 1 < len(members) < 500:
            for a in range(len(members)):
                for b in range(a + 1, len(members)):
                    candidates.add((members[a], members[b]))
    sims = {}
    for i, j in candidates:
        sims[(i, j)] = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
    # Documents without words (none here) would be 1.0 with each other: ignored.
    return {p for p, s in sims.items() if s >= threshold}, sims


def _pr(predicted: set, truth: set) -> tuple[float, float]:
    tp = len(predicted & truth)
    precision = tp / len(predicted) if predicted else 1.0
    recall = tp / len(truth) if truth else 1.0
    return precision, recall


def _components(n: int, pairs: set[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    return [find(i) for i in range(n)]


def _co_clustered(labels: list[Any]) -> set[tuple[int, int]]:
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, label in enumerate(labels):
        groups[label].append(i)
    return {(a, b) for g in groups.values() for ai, a in enumerate(g) for b in g[ai + 1 :]}


def bench_quality(opts: BenchOptions) -> list[Comparison]:
    import numpy as np
    from datasketch import MinHash, MinHashLSH

    from afm.filters.minhash import MinHasher, band_keys, shingles
    from afm.pipelines.dedup.pipeline import DedupConfig, dedup_records

    cfg = DedupConfig()
    docs, source = labelled_set(opts)
    texts = [d["text"] for d in docs]
    truth, sims = true_pairs(texts, cfg.threshold, cfg.ngram)

    # Ours, pairwise: shares a band (LSH candidate) and signature Jaccard >= threshold.
    hasher = MinHasher(cfg.num_perm, cfg.seed, cfg.ngram)
    sk = hasher.sketch(texts)
    bands, rows = cfg.lsh()
    keys = band_keys(sk.signatures, bands, rows)
    buckets: dict[int, list[int]] = defaultdict(list)
    for i in range(len(docs)):
        for k in keys[i].tolist():
            buckets[k].append(i)
    candidates = {(a, b) for m in buckets.values() for ai, a in enumerate(m) for b in m[ai + 1 :]}
    predicted = {
        (a, b) for a, b in candidates
        if float(np.mean(sk.signatures[a] == sk.signatures[b])) >= cfg.threshold
    }
    p_ours, r_ours = _pr(predicted, truth)
    _p_cand, r_cand = _pr(candidates, truth)

    # Baseline: datasketch MinHashLSH at the same threshold, its default weights and hash.
    lsh = MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm)
    mhs = MinHash.bulk([shingles(t, cfg.ngram) for t in texts], num_perm=cfg.num_perm, seed=cfg.seed)
    for i, mh in enumerate(mhs):
        lsh.insert(i, mh)
    base_pred = {(min(i, j), max(i, j)) for i, mh in enumerate(mhs) for j in lsh.query(mh) if j != i}
    p_base, r_base = _pr(base_pred, truth)

    # Ours, clusters from the Beam transform vs the components of the true graph.
    kept, rejected, _metrics = dedup_records(docs, cfg)
    cluster_of = {d["url"]: d["dup_cluster"] for d in kept + rejected}
    labels = [cluster_of[d["url"]] for d in docs]
    true_labels = _components(len(docs), truth)
    p_cluster, r_cluster = _pr(_co_clustered(labels), _co_clustered(true_labels))

    borderline = sum(1 for s in sims.values() if 0.7 <= s < 0.9)
    from afm.console import console

    console.print(f"labelled set: {len(docs)} documents from {source}; {len(truth)} pairs with "
                  f"5-gram Jaccard >= {cfg.threshold}; {borderline} pairs in [0.7, 0.9)")
    base = "datasketch MinHashLSH(0.8)"
    return [
        Comparison("pair precision (J>=0.8)", p_ours, p_base, base, "", ">= 0.95"),
        Comparison("pair recall (J>=0.8)", r_ours, r_base, base, "", ">= 0.90"),
        Comparison("LSH candidate recall", r_cand, r_base, base, "before verify"),
        Comparison("cluster pair precision", p_cluster, None, "", "Beam transform"),
        Comparison("cluster pair recall", r_cluster, None, "", "Beam transform"),
        Comparison("labelled documents", float(len(docs)), None, "", "docs"),
        Comparison("true pairs (J>=0.8)", float(len(truth)), None, "", "pairs"),
        Comparison("borderline pairs", float(borderline), None, "", "J in [0.7,0.9)"),
    ]


# ---------------------------------------------------------------- 3. end to end


def synthetic_corpus(n: int, seed: int, shared_dir: str | None) -> Iterator[dict[str, Any]]:
    """``n`` documents of 200-400 words drawn from real text's word distribution; 20%
    near-duplicates (a few words edited) and 10% exact copies of earlier documents."""
    from afm.schema import make_document

    texts, _source = real_texts(Path(shared_dir) if shared_dir else None)
    pool = word_pool(texts)
    rng = random.Random(seed)
    recent: list[str] = []
    for i in range(n):
        r = rng.random()
        if recent and r < 0.1:
            text = rng.choice(recent)
        elif recent and r < 0.3:
            words = rng.choice(recent).split()
            for _ in range(rng.randint(1, 6)):
                words[rng.randrange(len(words))] = rng.choice(pool)
            text = " ".join(words)
        else:
            text = " ".join(rng.choices(pool, k=rng.randint(200, 400)))
        recent.append(text)
        if len(recent) > 2000:
            recent.pop(rng.randrange(len(recent)))
        yield make_document(text, url=f"synthetic://{i}", quality_score=rng.random())


def _e2e_worker(which: str, n: int, seed: int, shared_dir: str | None) -> dict[str, Any]:
    """Run one side of the end-to-end benchmark (in a fresh process)."""
    from afm.app.bench.common import peak_rss_mb

    docs = list(synthetic_corpus(n, seed, shared_dir))
    start = time.perf_counter()
    if which == "ours":
        from afm.pipelines.dedup.pipeline import DedupConfig, dedup_records

        kept, rejected, _metrics = dedup_records(docs, DedupConfig())
        n_kept = len(kept)
    else:
        from datasketch import MinHash, MinHashLSH

        from afm.filters.minhash import shingles

        lsh = MinHashLSH(threshold=0.8, num_perm=128)
        seen: set[bytes] = set()
        n_kept = 0
        for d in docs:
            sh = shingles(d["text"], 5)
            key = b"\n".join(sh)
            if key in seen:
                continue
            seen.add(key)
            mh = MinHash(num_perm=128, seed=1)
            mh.update_batch(sh)
            if not lsh.query(mh):
                lsh.insert(d["id"], mh)
                n_kept += 1
    seconds = time.perf_counter() - start
    return {"docs_per_s": n / seconds, "seconds": seconds, "peak_mb": peak_rss_mb(), "kept": n_kept}


def _run_worker(which: str, n: int, shared_dir: Path | None) -> dict[str, Any]:
    code = (
        "import json, sys; from afm.app.bench.pipelines.dedup import _e2e_worker; "
        f"print('RESULT' + json.dumps(_e2e_worker({which!r}, {n}, 0, {str(shared_dir) if shared_dir else None!r})))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise RuntimeError(f"{which} worker failed: {proc.stderr[-2000:]}")


def bench_end_to_end(opts: BenchOptions) -> list[Comparison]:
    n = 10_000 if opts.quick else 100_000
    ours = _run_worker("ours", n, opts.shared_dir)
    base = _run_worker("datasketch", n, opts.shared_dir)
    return [
        Comparison(f"dedup {n:,} docs (Beam local runner)", ours["docs_per_s"], base["docs_per_s"],
                   "datasketch MinHashLSH, 1 process", "docs/s"),
        Comparison("peak memory", ours["peak_mb"], base["peak_mb"], "datasketch MinHashLSH, 1 process", "MiB"),
        Comparison("documents kept", float(ours["kept"]), float(base["kept"]), "datasketch (greedy)", "docs"),
    ]


BENCHMARKS = {
    "dedup_signatures": bench_signatures,
    "dedup_quality": bench_quality,
    "dedup_end_to_end": bench_end_to_end,
}
