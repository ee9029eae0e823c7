"""``afm bench dedup_hotkey``: de-duplication where one key is hot.

Web crawls are full of pages that are byte-identical (cookie walls, parked domains,
login pages) or near-identical (one shop template with a different product name). Each
such family is a *hot key* of the dedup graph: one content hash, a handful of LSH buckets
and one connected component hold all of its copies. A transform that gathers a hot key's
values into one list needs memory in proportion to the family, on one worker, whatever
the cluster size.

The benchmark builds that case at two sizes and runs ``afm dedup`` (the real command, a
fresh process, the default local runner) on each:

* ``copies`` byte-identical boilerplate pages (10,000, then 50,000; a fifth of that
  with ``--quick``),
* ``copies * 2 / 5`` near-copies of one product-page template (4,000, then 20,000; two
  slots of a 300-word page filled in differently, so every pair is a true duplicate),
* 2,000 unique documents of real-text words that must all be kept.

It checks the result (one document kept per family, every unique document kept) and
prints the peak memory of the run at both sizes and their ratio; the goal is < 1.5x for
5x the copies. Memory is sampled from ``/proc`` every 50 ms over the whole process tree:
the peak of the largest single process (the local runner holds every shuffle in its own
memory: the stand-in for Dataflow's shuffle service) and the peak of the tree's sum.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison
from afm.io import read_shard

BOILERPLATE = (
    "Before you continue. We use cookies and data to deliver and maintain our services, "
    "track outages and protect against spam, fraud and abuse, and measure audience "
    "engagement and site statistics to understand how our services are used and enhance "
    "the quality of those services. If you choose to accept all, we will also use cookies "
    "and data to develop and improve new services, deliver and measure the effectiveness "
    "of ads, and show personalised content depending on your settings. If you choose to "
    "reject all, we will not use cookies for these additional purposes. Non-personalised "
    "content is influenced by things like the content that you are currently viewing, "
    "activity in your active search session, and your location. Select more options to "
    "see additional information, including details about managing your privacy settings. "
    "You can also visit our privacy page at any time. Accept all. Reject all. More options."
)

TEMPLATE = (
    "Free delivery on orders over fifty pounds and easy returns within thirty days. "
    "{product} in {colour}: the product you have been waiting for. Our designers spent two "
    "years testing materials, shapes and finishes so that it fits the way you live and "
    "lasts for many seasons. Every piece is checked by hand before it leaves the workshop, "
    "and we publish the name of the person who inspected it on the label inside. The outer "
    "layer is woven from recycled fibres that keep their colour after hundreds of washes, "
    "while the lining stays soft and breathable in warm weather. Reinforced seams and "
    "double stitching at the points that wear first mean you will not have to replace it "
    "next year. Customers tell us they reach for it every morning, whether they are "
    "walking to the office, travelling for work or spending a weekend outdoors. Care is "
    "simple: wash cold, dry flat, and keep it away from direct heat. Sizes run true to "
    "the chart below; if you are between two sizes we recommend choosing the larger one. "
    "Add it to your basket today and it will be packed within one working day. Questions "
    "about sizing, materials or delivery times can be sent to our customer service team, "
    "who answer every message within a few hours on weekdays. Join our newsletter for "
    "early access to new collections, repair guides and invitations to workshop events "
    "across the country. Reviews from verified buyers appear below, with photos they "
    "shared after a month of use. Related items you may also like are shown further down "
    "the page, together with the full specification and the country of manufacture."
)
PRODUCTS = [f"{a} {b}" for a in ("Alpine", "Harbour", "Meadow", "Summit", "Coastal",
                                 "Forest", "Urban", "Canyon", "Prairie", "Glacier")
            for b in ("jacket", "parka", "fleece", "cardigan", "hoodie", "gilet")]
COLOURS = ["slate grey", "forest green", "navy blue", "burnt orange", "charcoal",
           "sand beige", "deep red", "ocean teal", "mustard", "plum"]
UNIQUE_DOCS = 2_000


def corpus(copies: int, seed: int = 0, unique: int = UNIQUE_DOCS) -> list[dict[str, Any]]:
    """The hot-key corpus (see the module docstring), as document records."""
    from afm.app.bench.pipelines.dedup import real_texts, word_pool
    from afm.schema import make_document
    from afm.shared_data import find_shared_dir

    rng = random.Random(seed)
    docs = [make_document(BOILERPLATE, url=f"https://site{i % 997}.example/consent?p={i}")
            for i in range(copies)]
    for i in range(copies * 2 // 5):
        text = TEMPLATE.format(product=rng.choice(PRODUCTS), colour=rng.choice(COLOURS))
        docs.append(make_document(text, url=f"https://shop.example/item/{i}"))
    texts, _ = real_texts(find_shared_dir())
    pool = word_pool(texts)
    for i in range(unique):
        docs.append(make_document(" ".join(rng.choices(pool, k=rng.randint(150, 300))),
                                  url=f"https://unique.example/{i}"))
    rng.shuffle(docs)
    return docs


def families(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Document id -> its family (boilerplate, template or unique-<i>)."""
    out = {}
    for d in docs:
        url = d["url"]
        out[d["id"]] = ("boilerplate" if "consent" in url else
                        "template" if "shop.example" in url else url)
    return out


def write_inputs(docs: list[dict[str, Any]], directory: Path, files: int = 8) -> list[str]:
    """The corpus as ``files`` Parquet files (the command's usual input)."""
    from afm.io import write_parquet

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    paths = []
    for f in range(files):
        path = directory / f"part-{f:02d}.parquet"
        write_parquet(docs[f::files], path)
        paths.append(str(path))
    return paths


class TreeMemory:
    """Peak RSS of a process and all its descendants, sampled from ``/proc``."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_total_mb = 0.0
        self.peak_single_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            sizes = [_rss_mb(p) for p in _tree(self.pid)]
            if sizes:
                self.peak_total_mb = max(self.peak_total_mb, sum(sizes))
                self.peak_single_mb = max(self.peak_single_mb, max(sizes))
            time.sleep(self.interval)


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_dedup(inputs: list[str], out: Path, extra: Sequence[str] = (),
              services: dict[str, int] | None = None,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """``afm dedup`` in a fresh process; its wall time, peak memory (and that of each
    process tree in ``services``: name -> pid, e.g. a worker pool) and output ids."""
    import contextlib


    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "afm.app", "dedup", "--output", str(out), *extra]
    for path in inputs:
        cmd += ["--input", path]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=str(out.parent), env={**os.environ, **(env or {})})
    watched = {name: TreeMemory(pid) for name, pid in (services or {}).items()}
    with TreeMemory(proc.pid) as mem, contextlib.ExitStack() as stack:
        for tree in watched.values():
            stack.enter_context(tree)
        log, _ = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"afm dedup failed ({proc.returncode}):\n{log[-3000:]}")
    kept = []
    for f in sorted(out.glob("documents-*.parquet")):
        kept += read_shard(f, columns=["id"]).column("id").to_pylist()
    return {"seconds": seconds, "peak_total_mb": mem.peak_total_mb,
            "peak_single_mb": mem.peak_single_mb, "kept": kept, "log": log,
            "services": {name: (t.peak_single_mb, t.peak_total_mb)
                         for name, t in watched.items()}}


def check_result(docs: list[dict[str, Any]], kept: list[str]) -> list[str]:
    """What is wrong with a dedup result of the corpus (empty: correct)."""
    fam = families(docs)
    kept_families: dict[str, int] = {}
    for doc_id in kept:
        kept_families[fam[doc_id]] = kept_families.get(fam[doc_id], 0) + 1
    problems = []
    for name in ("boilerplate", "template"):
        if kept_families.get(name) != 1:
            problems.append(f"{name}: {kept_families.get(name, 0)} kept, expected 1")
    unique = {f for f in fam.values() if f not in ("boilerplate", "template")}
    unique_kept = sum(n for f, n in kept_families.items() if f in unique)
    if unique_kept != len(unique):
        problems.append(f"unique documents: {unique_kept} kept of {len(unique)}")
    return problems


def _portable_runs(work: Path, sizes: tuple[int, int]) -> dict[int, dict[str, Any]]:
    """The same runs on Beam's portable runner with an external worker pool: the SDK
    workers' memory is what a cluster worker holds (the job service, like Dataflow's
    shuffle service, holds the shuffled data)."""
    from afm.pipelines.beam.portable_cluster import PortableCluster, install_site

    base = work / "portable"
    if base.exists():
        shutil.rmtree(base)
    (base / "services").mkdir(parents=True)
    (base / "launcher-tmp").mkdir()
    install_site(base / "afm-site", base / "build")
    cluster = PortableCluster(base / "services", base / "launcher-tmp", base / "afm-site",
                              mask=False)
    results = {}
    try:
        cluster.start()
        pool, job_service = (p.pid for p in cluster.procs)
        for copies in sizes:
            res = run_dedup([str(p) for p in sorted((work / f"in-{copies}").glob("*.parquet"))],
                            work / f"out-portable-{copies}", cluster.pipeline_args,
                            services={"workers": pool, "job service": job_service},
                            env={"TMPDIR": str(base / "launcher-tmp")})
            if "Traceback" in cluster.log_text():
                raise RuntimeError(f"worker errors:\n{cluster.log_text()[-3000:]}")
            results[copies] = res
    finally:
        cluster.stop()
    return results


def bench_hotkey(opts: BenchOptions) -> list[Comparison]:
    from afm.console import console

    small, large = (2_000, 10_000) if opts.quick else (10_000, 50_000)
    work = Path(opts.workdir).absolute() / "dedup_hotkey"
    results, corpora = {}, {}
    for copies in (small, large):
        docs = corpora[copies] = corpus(copies)
        inputs = write_inputs(docs, work / f"in-{copies}")
        res = run_dedup(inputs, work / f"out-{copies}")
        problems = check_result(docs, res["kept"])
        if problems:
            raise RuntimeError(f"{copies} copies deduplicated wrongly: {problems}")
        console.print(f"{copies:,} identical + {copies * 2 // 5:,} near-copies + "
                      f"{UNIQUE_DOCS:,} unique: {len(res['kept']):,} kept (correct), "
                      f"{res['seconds']:.1f} s, peak {res['peak_single_mb']:.0f} MiB "
                      f"(largest process), {res['peak_total_mb']:.0f} MiB (all processes)")
        results[copies] = res
    portable = _portable_runs(work, (small, large))
    for copies, res in portable.items():
        problems = check_result(corpora[copies], res["kept"])
        if problems:
            raise RuntimeError(f"{copies} copies deduplicated wrongly (portable): {problems}")
        workers, service = res["services"]["workers"], res["services"]["job service"]
        console.print(f"portable runner, {copies:,} copies: correct, {res['seconds']:.1f} s, "
                      f"SDK workers peak {workers[0]:.0f} MiB (largest), {workers[1]:.0f} MiB "
                      f"(all); job service (holds the shuffles) {service[1]:.0f} MiB")
    growth = large / small
    goal = f"< 1.5x for {growth:.0f}x the copies"
    a, b = results[small], results[large]
    pa_, pb = portable[small]["services"]["workers"], portable[large]["services"]["workers"]
    return [
        Comparison(f"peak memory, SDK worker (portable runner), {large:,} copies", pb[0],
                   pa_[0], f"{small:,} copies", "MiB", goal),
        Comparison(f"peak memory, local runner (holds every shuffle), {large:,} copies",
                   b["peak_single_mb"], a["peak_single_mb"], f"{small:,} copies", "MiB",
                   f"grows with the data ({growth:.0f}x copies)"),
        Comparison(f"wall time, {large:,} copies", b["seconds"], a["seconds"],
                   f"{small:,} copies", "s", f"about {growth:.0f}x or less"),
    ]


def main() -> None:  # pragma: no cover - manual A/B runs: python -m afm.app.bench.pipelines.hotkey N
    copies = int(sys.argv[1])
    work = Path(sys.argv[2] if len(sys.argv) > 2 else "work/bench/dedup_hotkey").absolute()
    docs = corpus(copies)
    inputs = write_inputs(docs, work / f"in-{copies}")
    res = run_dedup(inputs, work / f"out-{copies}", sys.argv[3:])
    print(json.dumps({"copies": copies, "seconds": round(res["seconds"], 1),
                      "peak_single_mb": round(res["peak_single_mb"]),
                      "peak_total_mb": round(res["peak_total_mb"]),
                      "problems": check_result(docs, res["kept"])}))


BENCHMARKS = {"dedup_hotkey": bench_hotkey}

if __name__ == "__main__":  # pragma: no cover
    main()
