"""``afm curate``, ``afm dedup``, ``afm tokenize`` and ``afm fetch`` on Beam's portable runner, with the
SDK workers in an external worker pool that sees neither the launcher's temporary
directory nor the source tree (see ``afm.pipelines.beam.portable_cluster``), against the default local runner.

What a cluster run must give: exit 0, the accounting rule, exactly the kept and rejected
documents of a local run, dedup metrics that reach the launcher, byte-identical token
shards, the pages and training-use decisions of a local fetch, and no Traceback in any
worker log. Small inputs: the slow part is each job's
start-up, not the data.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from afm.pipelines.beam.portable_cluster import PortableCluster, install_site
from tests.paths import ROOT

pytestmark = pytest.mark.timeout(900)
LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


# ------------------------------------------------------------------------------ inputs


def _warcs(extraction: Path, out: Path, pages: int = 24) -> tuple[list[Path], str]:
    """Real article pages in two gzip WARCs, plus three copies under other URLs and one
    page that quotes a question of the demo benchmark. Returns (files, that page's URL)."""
    from afm.app.bench.pipelines.curate import write_html_warcs

    truth = json.loads((extraction / "ground-truth.json").read_text(encoding="utf-8"))
    records, bodies = [], []
    for path in sorted((extraction / "html").glob("*.html.gz"))[:pages]:
        key = path.name.split(".")[0]
        url = truth.get(key, {}).get("url") or f"http://portable.test/{key}"
        records.append((url, gzip.decompress(path.read_bytes())))
        bodies.append(truth.get(key, {}).get("articleBody") or "")
    records += [(f"http://mirror.portable.test/{i}", body) for i, (_, body) in
                enumerate(records[:3])]
    question = json.loads(
        (ROOT / "filters/data/benchmarks/demo-math.jsonl")
        .read_text().splitlines()[0])["question"]
    # One page (not a mirrored one) gets the question inside its article text, where
    # extraction keeps it: in front of the first words of its ground-truth body.
    for i in range(3, pages):
        url, raw = records[i]
        html = raw.decode("utf-8", "replace")
        article = bodies[i]
        at = html.find(article[:30], max(html.find("<body"), 0)) if len(article) >= 30 else -1
        if at >= 0:
            records[i] = (url, f"{html[:at]}Homework help: {question} {html[at:]}".encode())
            contaminated_url = url
            break
    else:
        raise AssertionError("no page of the extraction set has its article text verbatim")
    out.mkdir(parents=True)
    files = [out / f"part-{i}.warc.gz" for i in range(2)]
    write_html_warcs(records, files)
    return files, contaminated_url


@pytest.fixture(scope="module")
def world(tmp_path_factory, shared_eval) -> dict[str, Any]:
    """Worker-visible inputs ("shared storage"), the launcher's private temp directory,
    and the running services."""
    from afm.app.bench.pipelines.dedup import synthetic_corpus
    from afm.filters.benchmarks import DATA_DIR, build_index, specs_from
    from afm.io import write_parquet
    from afm.model.text.tokenizer import train_tokenizer

    base = tmp_path_factory.mktemp("portable")
    shared = base / "shared"
    launcher_tmp = base / "launcher-tmp"
    launcher_tmp.mkdir()
    warcs, contaminated = _warcs(shared_eval / "extraction", shared / "crawl")
    build_index(specs_from(DATA_DIR), shared / "decontam-index")
    docs = list(synthetic_corpus(2_000, seed=3, shared_dir=str(shared_eval.parent)))
    (shared / "docs").mkdir()
    for i in range(2):
        write_parquet(docs[i::2], shared / "docs" / f"part-{i}.parquet")
    train_tokenizer([str(shared / "docs")], shared / "tokenizer", vocab_size=512,
                    sample_docs=400, character_coverage=0.99)
    install_site(base / "afm-site", base / "build")
    (base / "services").mkdir()
    cluster = PortableCluster(base / "services", launcher_tmp, base / "afm-site")
    try:
        cluster.start()
        print(f"\nportable runner: job service :{cluster.job_port}, worker pool "
              f":{cluster.pool_port}; "
              + ("launcher TMPDIR and source tree masked in the services' mount namespaces"
                 if cluster.masked else "unshare not permitted here: masking skipped"))
        yield {"base": base, "shared": shared, "warcs": warcs, "contaminated": contaminated,
               "cluster": cluster}
    finally:
        cluster.stop()


def _launch(world: dict[str, Any], *args: str) -> subprocess.CompletedProcess:
    """An ``afm`` command as a user launches it: its own process, its own TMPDIR."""
    env = {**os.environ, "TMPDIR": str(world["cluster"].launcher_tmp), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "afm.app", *args,
                           *world["cluster"].pipeline_args],
                          capture_output=True, text=True, env=env, cwd=str(world["base"]),
                          timeout=600)


def _ids(directory: Path, prefix: str) -> dict[str, str]:
    """id -> "stage|reason" (rejects) or "" (documents) of a dataset directory."""
    out = {}
    for f in sorted(directory.glob(f"{prefix}-*.parquet")):
        cols = ["id", "rejected_by", "reason"] if prefix == "rejects" else ["id"]
        for row in pq.read_table(f, columns=cols).to_pylist():
            out[row["id"]] = f"{row.get('rejected_by')}|{row.get('reason')}" if prefix == "rejects" else ""
    return out


def _same_outcome(local: Path, portable: Path) -> dict[str, Any]:
    manifest = json.loads((portable / "manifest.json").read_text())
    assert manifest["accounting"]["ok"], manifest["accounting"]
    totals = manifest["totals"]
    assert totals["in"] == totals["kept"] + totals["rejected"]
    assert (portable / "_SUCCESS").exists()
    assert _ids(portable, "documents") == _ids(local, "documents")
    assert _ids(portable, "rejects") == _ids(local, "rejects")
    return manifest


def _no_tracebacks(world: dict[str, Any], res: subprocess.CompletedProcess) -> None:
    """Nothing failed anywhere (a retried bundle would leave its Traceback in the job
    service's log), and the SDK workers were the pool's, not the launcher's."""
    logs = world["cluster"].log_text()
    assert "Traceback" not in logs, logs[-4000:]
    assert "Traceback" not in res.stdout + res.stderr, res.stderr[-4000:]
    assert "Starting worker with command" in logs, logs[-4000:]


# ------------------------------------------------------------------------------- tests


def test_curate_on_the_portable_runner(world) -> None:
    from afm.pipelines.curate.pipeline import run_curate

    shared = world["shared"]
    index = str(shared / "decontam-index")
    local = shared / "curate-local"
    run_curate([str(f) for f in world["warcs"]], local, pipeline_args=LOCAL, quiet=True,
               config={"decontaminate": {"params": {"index": index}}})
    res = _launch(world, "curate", "--input", str(shared / "crawl"), "--output",
                  str(shared / "curate-portable"), "--decontam-index", index)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    manifest = _same_outcome(local, shared / "curate-portable")
    assert manifest["runner"] == "PortableRunner"
    funnel = {s["stage"]: s for s in manifest["funnel"]}
    assert funnel["quality_model"]["status"] == "disabled"  # off by default (docs/quality.md)
    # The index was read on the workers: the planted page is dropped, naming the benchmark.
    assert funnel["decontaminate"]["dropped"] >= 1
    decontaminated = [r["url"] for f in sorted((shared / "curate-portable").glob("rejects-*"))
                      for r in pq.read_table(f, columns=["url", "rejected_by"]).to_pylist()
                      if r["rejected_by"] == "decontaminate"]
    assert world["contaminated"] in decontaminated
    assert funnel["dedup"]["dropped"] >= 3  # the mirrored pages
    assert manifest["totals"]["kept"] > 0
    _no_tracebacks(world, res)


@pytest.mark.slow  # heaviest of the three; curate and tokenize keep the portable path in the normal tier
def test_dedup_on_the_portable_runner(world) -> None:
    from afm.pipelines.curate.pipeline import run_curate

    shared = world["shared"]
    local = shared / "dedup-local"
    run_curate([str(shared / "docs")], local, command="dedup", pipeline_args=LOCAL, quiet=True,
               config={"stages": ["dedup"],
                       "output": {"shard_target_mb": 0.5, "rejects_shard_target_mb": 0.5}})
    res = _launch(world, "dedup", "--input", str(shared / "docs"), "--output",
                  str(shared / "dedup-portable"), "--shard-mb", "0.5")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    manifest = _same_outcome(local, shared / "dedup-portable")
    metrics = manifest["metrics"]
    for name in ("documents_in", "rejected_exact", "rejected_near", "verified_edges",
                 "candidate_edges"):
        assert metrics.get(f"afm.dedup/{name}", 0) > 0, (name, metrics)
    _no_tracebacks(world, res)


def test_tokenize_on_the_portable_runner(world) -> None:
    from afm.pipelines.tokenize import run_tokenize

    shared = world["shared"]
    local = shared / "tokens-local"
    run_tokenize([str(shared / "docs")], shared / "tokenizer", local, shard_docs=400)
    res = _launch(world, "tokenize", "--input", str(shared / "docs"), "--tokenizer",
                  str(shared / "tokenizer"), "--output", str(shared / "tokens-portable"),
                  "--shard-docs", "400")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    portable = shared / "tokens-portable"
    manifest = json.loads((portable / "manifest.json").read_text())
    assert manifest["accounting"]["ok"] and manifest["runner"] == "PortableRunner"
    shards = sorted(p.name for p in local.glob("tokens-*.parquet"))
    assert len(shards) >= 2 and shards == sorted(p.name for p in portable.glob("tokens-*.parquet"))
    for name in shards:
        assert (local / name).read_bytes() == (portable / name).read_bytes(), name
    _no_tracebacks(world, res)


@pytest.mark.slow  # curate's decontaminate stage runs the same transform in the normal tier
def test_decontam_run_on_the_portable_runner(world) -> None:
    """The counting pass (documents per colliding n-gram, joined back by key) runs across
    the pool's workers: a rare n-gram drops its document, a common one is excused."""
    from afm.io import write_parquet
    from afm.pipelines.curate.pipeline import run_curate
    from afm.schema import make_document

    shared = world["shared"]
    rows = [json.loads(line) for line in
            (ROOT / "filters/data/benchmarks/demo-math.jsonl")
            .read_text().splitlines()]
    common = " ".join(rows[9]["question"].split()[:13])
    texts = [f"Homework help. {rows[0]['question']} Ask a tutor."]
    texts += [f"{common} (forum post {i})" for i in range(4)]  # held by 4 >= threshold 3
    texts += [f"Plain page {i} about rivers, bridges and the weather." for i in range(40)]
    docs = [make_document(t, url=f"https://forum.portable.test/{i}")
            for i, t in enumerate(texts)]
    (shared / "forum").mkdir()
    for i in range(2):
        write_parquet(docs[i::2], shared / "forum" / f"part-{i}.parquet")
    index = str(shared / "decontam-index")
    params = {"index": index, "threshold": 3, "batch_docs": 256}
    local = shared / "decontam-local"
    run_curate([str(shared / "forum")], local, command="decontam run", pipeline_args=LOCAL,
               quiet=True, config={"stages": ["decontaminate"],
                                   "decontaminate": {"params": params}})
    res = _launch(world, "decontam", "run", "--index", index, "--input", str(shared / "forum"),
                  "--output", str(shared / "decontam-portable"), "--threshold", "3")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    manifest = _same_outcome(local, shared / "decontam-portable")
    assert manifest["runner"] == "PortableRunner"
    assert manifest["totals"] == {**manifest["totals"], "in": len(docs), "rejected": 1}
    report = manifest["stage_reports"]["decontaminate"]["benchmarks"]["demo-math"]
    assert report["documents_removed"] == 1 and report["excused_ngrams"] >= 1
    _no_tracebacks(world, res)


def test_fetch_on_the_portable_runner(world) -> None:
    """The pool's workers fetch a loopback web (one host of each kind of the mixed web:
    robots.txt rules, Crawl-delay, every opt-out signal, failing and redirecting hosts):
    the same pages, statuses and training-use decisions as a local run, every URL one
    outcome."""
    from afm.app.bench.crawler.fetch import KINDS, mixed_web, serve, web_urls
    from afm.crawler.storage.warc import read_index
    from afm.pipelines.fetch.pipeline import run_fetch

    shared = world["shared"]
    settings = {"allow_private": True, "host_interval": 0.05, "retry_times": 1, "download_timeout": 5}
    web = mixed_web(len(KINDS), 4, delay=0.2)
    site = serve(web)
    try:
        urls = web_urls(site, web)
        (shared / "urls.txt").write_text("\n".join(urls) + "\n")
        local = run_fetch([str(shared / "urls.txt")], str(shared / "fetch-local"), config=settings,
                          pipeline_args=LOCAL, quiet=True)
        sets = [a for k, v in settings.items() for a in ("--set", f"{k}={json.dumps(v)}")]
        res = _launch(world, "fetch", "--urls", str(shared / "urls.txt"), "--output",
                      str(shared / "fetch-portable"), *sets)
    finally:
        site.stop()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((shared / "fetch-portable" / "summary.json").read_text())
    assert summary["runner"] == "PortableRunner"
    assert summary["accounting_ok"] and summary["urls_in"] == len(urls)
    assert summary["outcomes"] == local["outcomes"]

    def pages(out: Path) -> dict[str, tuple]:
        return {r["request_url"]: (r["url"], r["status"], r["training_use"])
                for r in read_index(out)}

    assert pages(shared / "fetch-portable") == pages(shared / "fetch-local")
    assert len(pages(shared / "fetch-local")) == local["pages"] > 0
    _no_tracebacks(world, res)


@pytest.mark.slow  # the fast tier runs fetch and curate on the pool apart, and the joint job locally
def test_curate_urls_on_the_portable_runner(world) -> None:
    """``afm curate --urls`` on the pool's workers: the fetch, then curate reading what it
    wrote (the barrier holds across real workers), keeps and rejects what the same job does
    on the local runner; URLs in = outcomes, pages fetched = pages read."""
    from afm.app.bench.crawler.fetch import KINDS, mixed_web, serve, web_urls
    from afm.pipelines.curate.from_urls import run_curate_urls

    shared = world["shared"]
    settings = {"allow_private": True, "host_interval": 0.05, "retry_times": 1, "download_timeout": 5}
    curate = {"decontaminate": {"enabled": False}, "quality": {"enabled": False}}
    web = mixed_web(len(KINDS), 3, delay=0.2)
    site = serve(web)
    try:
        urls = web_urls(site, web)
        (shared / "joint-urls.txt").write_text("\n".join(urls) + "\n")
        run_curate_urls([str(shared / "joint-urls.txt")], str(shared / "joint-local"), config=curate,
                        fetch_config=settings, pipeline_args=LOCAL, quiet=True)
        sets = [a for k, v in settings.items() for a in ("--fetch-set", f"{k}={json.dumps(v)}")]
        res = _launch(world, "curate", "--urls", str(shared / "joint-urls.txt"), "--output",
                      str(shared / "joint-portable"), "--set", "decontaminate.enabled=false",
                      "--set", "quality.enabled=false", *sets)
    finally:
        site.stop()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    manifest = json.loads((shared / "joint-portable" / "manifest.json").read_text())
    assert manifest["runner"] == "PortableRunner"
    fetch = manifest["fetch"]
    assert fetch["accounting_ok"] and fetch["urls_in"] == fetch["outcomes_out"] == len(urls)
    assert fetch["pages"] == fetch["pages_read"] == manifest["totals"]["in"] > 0

    def outcome(out: Path) -> tuple[set, dict]:
        kept = {r["url"] for f in out.glob("documents-*.parquet") for r in pq.read_table(f).to_pylist()}
        rejected = {r["url"]: (r["rejected_by"], r["reason"])
                    for f in out.glob("rejects-*.parquet") for r in pq.read_table(f).to_pylist()}
        return kept, rejected

    assert outcome(shared / "joint-portable") == outcome(shared / "joint-local")
    _no_tracebacks(world, res)
