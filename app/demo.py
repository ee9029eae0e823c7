"""``afm demo``: the whole flow on the bundled demo site, end to end, on one CPU.

It serves the demo site (``app/demo_site/site.yaml``) on loopback, crawls it politely,
curates the crawl (extraction, language, safety, PII, dedup, quality,
decontamination), trains a tokenizer, tokenizes the corpus, runs the three tiny
pre-training stages, evaluates the last checkpoint on a tiny task set (``afm eval``),
then prepares the demo instruction set and fine-tunes on it (SFT), measures the SFT model's
safety violation and over-refusal rates with the keyword detector (toy scale), runs the on-device
start in miniature (a wider teacher, learned FFN pruning, and a student distilled from the
teacher's top-1 tokens), and ends with the deployment recipe: the post-trained model
palettized below 4 bits with an accuracy-recovery LoRA adapter, compared with the 16-bit
model (``afm quantize``, ``afm adapter train``, ``afm adapter table``).
Every output path is printed at the end.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from afm.io import read_shard


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class DemoRun:
    """Runs the stages in order and remembers what each produced."""

    def __init__(self, workdir: Path, train_steps: int) -> None:
        self.workdir = workdir
        self.train_steps = train_steps
        self.outputs: list[tuple[str, str]] = []
        self.timings: list[tuple[str, float]] = []
        self.skipped: list[str] = []

    def stage(self, name: str, module: str, fn: Callable[[], Any]) -> Any:
        from afm.console import console

        if not _available(module):
            console.print(f"[yellow]- {name}: skipped ({module} is not part of this build)")
            self.skipped.append(name)
            return None
        console.rule(f"[bold cyan]demo: {name}")
        start = time.perf_counter()
        result = fn()
        self.timings.append((name, time.perf_counter() - start))
        return result

    # -- stages ---------------------------------------------------------------------------

    def crawl(self, sites: Any) -> Path:
        from afm.app.demosite import seed_paths
        from afm.crawler.api import crawl

        out = self.workdir / "crawl"
        seeds = [sites.url(host, path) for host, path in seed_paths()]
        summary = crawl(seeds, out, max_pages=200, allow_private=True, user_agent="afmbot")
        from afm.console import print_summary

        print_summary("crawl", {
            "pages": summary["pages"],
            "bytes": summary["bytes"],
            "robots.txt denials": summary["robots_denied"],
            **{f"HTTP {k}": v for k, v in sorted(summary.get("status_counts", {}).items())},
        })
        self.outputs.append(("crawl WARC", str(out)))
        if summary.get("index_path"):
            self.outputs.append(("crawl index", str(summary["index_path"])))
        disallowed = [p for _h, p, _t in sites.requests if p.startswith("/private/")]
        if disallowed:
            raise RuntimeError(f"the crawler requested robots-disallowed pages: {disallowed}")
        return out

    def later_optouts(self, sites: Any, served: dict[str, Any]) -> Path:
        """After the crawl, some hosts opt out of training (``later_robots`` in
        site.yaml): serve their new robots.txt, fetch it again with a one-page crawl of
        each (whose ``robotstxt/`` keeps the new snapshot), and build the snapshot store
        curate reads, from both crawls: the newest snapshot of a host wins."""
        from afm.app.demosite import later_robots
        from afm.consent.snapshots import build_store
        from afm.console import print_summary
        from afm.crawler.api import crawl
        from afm.crawler.testsite import Page

        later = later_robots()
        for host, text in later.items():
            served[host]["/robots.txt"] = Page(text, headers={"Content-Type": "text/plain"})
        recheck = self.workdir / "crawl-later"
        crawl([sites.url(host, "/robots.txt") for host in later], recheck, max_pages=len(later),
              allow_private=True, user_agent="afmbot")
        store = self.workdir / "robots-snapshots"
        manifest = build_store([str(self.workdir / "crawl"), str(recheck)], str(store))
        print_summary("robots snapshots", {
            "hosts that opted out after the crawl": ", ".join(sorted(later)),
            "snapshots read": manifest["snapshots_read"], "hosts": manifest["hosts"],
            "kept (newest per host)": manifest["kept"], "superseded": manifest["superseded"]})
        self.outputs.append(("robots.txt / tdmrep.json snapshot store", str(store)))
        return store

    def check_optouts(self, corpus: Path, sites: Any) -> None:
        """The hosts that opted out (``optout: true`` in site.yaml) lost exactly their
        pages to the optout stage, and nothing else did."""
        from afm.app.demosite import optout_hosts

        rejected: dict[str, int] = {}
        for shard in sorted(corpus.glob("rejects-*.parquet")):
            for row in read_shard(shard, columns=["url", "rejected_by"]).to_pylist():
                if row["rejected_by"] == "optout":
                    host = sites.host_of(row["url"].split("/")[2].split(":")[0])
                    rejected[host] = rejected.get(host, 0) + 1
        crawled: dict[str, int] = {}
        from afm.crawler.storage.warc import read_index

        for row in read_index(self.workdir / "crawl"):
            if row["status"] == 200:
                host = sites.host_of(row["url"].split("/")[2].split(":")[0])
                crawled[host] = crawled.get(host, 0) + 1
        expected = {h: crawled.get(h, 0) for h in optout_hosts()}
        if rejected != expected:
            raise RuntimeError(f"optout dropped {rejected}, expected every page of {expected}")

    def decontam_index(self) -> Path:
        from afm.pipelines.decontaminate import build_index

        out = self.workdir / "decontam-index"
        from importlib import resources

        bench_dir = resources.files("afm.filters").joinpath("data/benchmarks")
        build_index(str(bench_dir), out)
        self.outputs.append(("decontamination index", str(out)))
        return out

    def curate(self, crawl_dir: Path, index: Path | None, snapshots: Path | None = None) -> Path:
        from afm.pipelines.curate.pipeline import run_curate

        out = self.workdir / "corpus"
        # The decontamination index is passed explicitly: curate has no default one.
        config: dict[str, Any] = {"decontaminate": {"params": {"index": str(index)}}}
        if snapshots is not None:  # the store with the later opt-outs (else the crawl's own)
            config["optout"] = {"params": {"snapshots": [str(snapshots)]}}
        # A demo crawl is tiny: Beam's in-process runner beats paying multi-process start-up.
        manifest = run_curate(
            [str(crawl_dir)], out, config=config or None,
            pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
        )
        self.outputs.append(("curated shards", str(out)))
        report = out / "report.html"
        if report.exists():
            self.outputs.append(("curation report", str(report)))
        self.manifest = manifest
        return out

    def tokenizer(self, corpus: Path) -> Path:
        from afm.model.text.tokenizer import train_tokenizer

        out = self.workdir / "tokenizer"
        # The corpus directory itself: readers take its documents-* shards, never rejects.
        train_tokenizer([str(corpus)], out, vocab_size=512)
        self.outputs.append(("tokenizer", str(out)))
        return out

    def tokenize(self, corpus: Path, tokenizer: Path) -> Path:
        from afm.pipelines.tokenize import run_tokenize

        out = self.workdir / "tokens"
        run_tokenize([str(corpus)], tokenizer, out)
        self.outputs.append(("token shards", str(out)))
        return out

    def train(self, tokens: Path) -> dict[str, Any]:
        from afm.training.runs.train import train

        data = [str(tokens)]
        results = {}
        previous: Path | None = None
        for stage in ("tiny-core", "tiny-continued", "tiny-context"):
            workdir = self.workdir / "train" / stage
            result = train(stage, workdir, steps=self.train_steps, data=data, init_from=previous)
            results[stage] = result
            previous = Path(result["checkpoint"]) if result.get("checkpoint") else workdir
            self.outputs.append((f"checkpoint {stage}", str(previous)))
        return results

    def evaluate(self, checkpoint: Path, tokenizer: Path, tokens: Path, index: Path | None) -> dict[str, Any]:
        from afm.evaluation.report import write_report
        from afm.evaluation.results import write_results
        from afm.evaluation.runner import EvalSpec, run_eval
        from afm.evaluation.suite import prepare_demo_data

        spec = EvalSpec(
            checkpoint=str(checkpoint), tokenizer=str(tokenizer), tasks=["afm-demo"], num_fewshot=0,
            data_dir=prepare_demo_data(self.workdir / "eval" / "data"),
            perplexity_data=[str(tokens)], perplexity_max_docs=64,
            decontam_index=str(index) if index else None,
            niah={"lengths": [64, 128, 240], "depths": [0.0, 0.5, 1.0], "per_cell": 1}, show_progress=False,
        )
        results = run_eval(spec)
        results["notes"]["perplexity"] = ("the demo's own token shards (seen in training: the demo "
                                          "corpus is too small to hold a split out)")
        out = self.workdir / "eval" / "results.json"
        write_results(results, out)
        write_report(results, out.with_suffix(".png"), out.with_suffix(".html"))
        self.eval_results = results
        self.outputs += [("eval results", str(out)), ("eval report", str(out.with_suffix(".html")))]
        return results

    def on_device(self, tokens: Path) -> dict[str, Any]:
        """Teacher -> Soft-Top-K FFN pruning -> pruned checkpoint -> precomputed top-1
        targets -> distilled student (report §3.2.1, tiny)."""
        from afm.training.compress.distill_targets import compute_targets
        from afm.training.compress.pruning import apply_pruning
        from afm.training.runs.train import train

        runs = self.workdir / "train"
        data = [str(tokens)]
        teacher = train("tiny-teacher-core", runs / "tiny-teacher", steps=self.train_steps, data=data)
        self.outputs.append(("checkpoint tiny-teacher", str(runs / "tiny-teacher")))
        prune = train("tiny-prune", runs / "tiny-prune", init_from=str(runs / "tiny-teacher"), data=data,
                      heldout=data, steps=self.train_steps, task_options={"target_ffn_dim": 192})
        pruned = runs / "tiny-pruned"
        apply_pruning(str(runs / "tiny-prune"), str(pruned))
        self.outputs.append(("pruned checkpoint (ffn 576 -> 192)", str(pruned)))
        targets = self.workdir / "distill-tokens"
        compute_targets(str(runs / "tiny-teacher"), data, str(targets))
        self.outputs.append(("teacher top-1 targets", str(targets)))
        student = train("tiny-distill-core", runs / "tiny-student", steps=self.train_steps,
                        data=[str(targets)], init_from=pruned)
        self.outputs.append(("checkpoint tiny-student (pruned + distilled)", str(runs / "tiny-student")))
        return {"teacher": teacher, "prune": prune, "student": student}

    def sft(self, tokenizer: Path, index: Path | None, base: Path) -> dict[str, Any]:
        """The demo instruction set (``afm.synth.demo_data``, Apache-2.0) prepared with
        the demo tokenizer (PII, dedup, decontamination against the demo benchmark), then a
        short SFT run from the last pre-training checkpoint."""
        from afm.synth.demo_data import write_demo_set
        from afm.synth.prepare import PrepareConfig, prepare_sft
        from afm.training.runs.train import train
        from afm.training.tasks.sft import heldout_metrics

        root = self.workdir / "sft"
        files = write_demo_set(root / "raw", per_set=60, held_out_per_set=10)
        prepared: dict[str, list[str]] = {"train": [], "heldout": []}
        dropped: dict[str, int] = {}
        for split, named in files.items():
            for name, path in named.items():
                out = root / split / name
                manifest = prepare_sft([path], str(out), PrepareConfig(
                    name, str(tokenizer), str(index) if index else None, max_tokens=256), progress=False)
                prepared[split].append(str(out))
                for stage, c in manifest["stages"].items():
                    for reason, n in c["reasons"].items():
                        dropped[f"{stage}/{reason}"] = dropped.get(f"{stage}/{reason}", 0) + n
        steps = self.train_steps or 30
        before = heldout_metrics("tiny-sft", base, prepared["heldout"])
        result = train("tiny-sft", root / "run", data=prepared["train"], heldout=prepared["heldout"],
                       init_from=str(base), steps=steps, overrides=[f"eval.every_steps={max(steps // 3, 1)}"])
        self.outputs.append(("SFT data", str(root / "train")))
        self.outputs.append(("SFT best checkpoint", str(root / "run" / "best")))
        return {"before": before["loss"], "after": result.get("best_value"), "dropped": dropped,
                "first_loss": result.get("first_loss"), "final_loss": result.get("final_loss")}

    def safety(self, checkpoint: Path, tokenizer: Path, per_set: int = 16) -> dict[str, Any]:
        """The SFT model's violation rates on harmful prompts (HarmBench, XSTest's unsafe ones)
        and its over-refusal rate on XSTest's safe prompts, with the keyword refusal detector:
        toy scale (a 2-layer model, a few prompts per set), labelled so in the results."""
        from afm.evaluation.posttrain.runner import PosttrainOptions
        from afm.evaluation.report import write_report
        from afm.evaluation.results import write_results
        from afm.evaluation.runner import EvalSpec, run_eval

        options = PosttrainOptions(safety_detector="keyword", max_new_tokens=24,
                                   scale_note="toy scale (the demo's tiny SFT model, a few prompts per set)")
        spec = EvalSpec(checkpoint=str(checkpoint), tokenizer=str(tokenizer), tasks=["afm-safety"], limit=per_set,
                        posttrain=options, show_progress=False)
        results = run_eval(spec)
        out = self.workdir / "eval" / "safety.json"
        write_results(results, out)
        write_report(results, out.with_suffix(".png"), out.with_suffix(".html"))
        self.outputs += [("SFT safety results", str(out)), ("SFT safety report", str(out.with_suffix(".html")))]
        return {t: results["tasks"][t] for t in ("safety_harmbench", "safety_xstest", "overrefusal_xstest")}

    def quantize_and_recover(self, checkpoint: Path, tokenizer: Path, tokens: Path) -> dict[str, Any]:
        from afm.app.studies.recovery_demo import run_recovery_demo
        from afm.evaluation.suite import prepare_demo_data

        out = run_recovery_demo(checkpoint, tokens, tokenizer, self.workdir / "quantize",
                                data_dir=prepare_demo_data(self.workdir / "eval" / "data"))
        self.outputs += [("quantized model", out["quantization"]["output"]),
                         ("recovery adapter", str(out["adapter"]["model_checkpoint"])),
                         ("quantization table", out["paths"]["md"])]
        self.recovery = out
        return out

    def reward_model(self, tokenizer: Path, sft_model: Path) -> dict[str, Any]:
        """A tiny reward-model step after SFT: arithmetic problems (``afm.synth.arith_task``)
        with scripted replies graded by the program, a few RM steps from the SFT model, and
        its held-out pairwise accuracy by preference level."""
        import random

        from afm.synth.arith_task import corrupted_responses, make_problems, write_preferences
        from afm.training.runs.train import train

        root = self.workdir / "rm"
        rng = random.Random(0)
        for split, seed, n in (("train", 1, 48), ("heldout", 2, 16)):
            write_preferences(root / f"prefs-{split}.jsonl",
                              [(p.messages(), corrupted_responses(p, rng)) for p in make_problems(n, seed=seed)],
                              pairs_per_prompt=3, seed=seed)
        result = train("tiny-rm", root / "run", data=[str(root / "prefs-train.jsonl")],
                       heldout=[str(root / "prefs-heldout.jsonl")], task_options={"tokenizer": str(tokenizer)},
                       init_from=str(sft_model), steps=min(self.train_steps or 10, 10),
                       overrides=["eval.every_steps=10", "checkpoint.every_steps=10", "data.seq_len=256"],
                       quiet=True)
        self.outputs.append(("reward model", result["reward_model"]))
        return result["heldout"]

    def mdloo(self, tokenizer: Path, policy: Path) -> dict[str, Any]:
        """One tiny MDLOO iteration from the SFT model on arithmetic prompts (true task reward)."""
        import json

        from afm.synth.arith_task import make_problems
        from afm.training.runs.train import train

        root = self.workdir / "mdloo"
        root.mkdir(parents=True, exist_ok=True)
        prompts = root / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"messages": p.messages()}) + "\n" for p in make_problems(8, seed=0)))
        result = train("tiny-mdloo", root / "run", init_from=str(policy), overrides=["data.seq_len=240"],
                       task_options={"tokenizer": str(tokenizer), "prompts": str(prompts), "reward": "task:arith",
                                     "iterations": 1, "prompts_per_iteration": 2, "k": 4, "steps_per_iteration": 1,
                                     "max_new_tokens": 16})
        summary = result["summary"]
        self.outputs.append(("MDLOO policy", summary["model"]))
        return summary["last"]


def crawl_demo_site(workdir: Path) -> tuple[Path, Path, Path]:
    """The demo's first steps alone, for a study that starts from the same crawl (``afm
    ablate --demo``): serve the demo site, crawl it, snapshot the later opt-outs, build the
    decontamination index. Returns (crawl directory, snapshot store, index)."""
    from afm.app.demosite import render_site
    from afm.crawler.testsite import LocalSites, Page

    run = DemoRun(workdir, 0)
    spec = {host: {path: Page(**page) for path, page in pages.items()} for host, pages in render_site().items()}
    with LocalSites(spec) as sites:
        crawl_dir = run.crawl(sites)
        snapshots = run.later_optouts(sites, spec)
    return crawl_dir, snapshots, run.decontam_index()


@click.command("demo", epilog="""\b
Examples:
  afm demo                          # everything, into work/demo
  afm demo --workdir /tmp/afm-demo --train-steps 50
""")
@click.option("--workdir", type=click.Path(path_type=Path), default=Path("work/demo"), show_default=True,
              help="Where every stage writes its output (replaced if it exists).")
@click.option("--train-steps", type=int, default=None,
              help="Steps per tiny training stage (default: the stage config's own).")
def demo_command(workdir: Path, train_steps: int | None) -> None:
    """Run the whole flow on the bundled demo site: crawl, curate, tokenize, train."""
    import shutil

    from afm.console import console, print_summary, setup_logging

    setup_logging("WARNING")
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    run = DemoRun(workdir, train_steps)  # type: ignore[arg-type]
    start = time.perf_counter()

    from afm.app.demosite import render_site
    from afm.crawler.testsite import LocalSites, Page

    sites_spec = {
        host: {path: Page(**page) for path, page in pages.items()} for host, pages in render_site().items()
    }
    with LocalSites(sites_spec) as sites:
        console.print("demo site: " + ", ".join(f"{h}={sites.base_url(h)}" for h in sites_spec))
        crawl_dir = run.stage("crawl", "afm.crawler.api", lambda: run.crawl(sites))
        snapshots = None
        if crawl_dir is not None:
            snapshots = run.stage("opt-outs after the crawl", "afm.crawler.api",
                                  lambda: run.later_optouts(sites, sites_spec))
    index = run.stage("decontamination index", "afm.pipelines.decontaminate", run.decontam_index)
    corpus = run.stage("curate", "afm.pipelines.curate.pipeline",
                       lambda: run.curate(crawl_dir, index, snapshots))
    if corpus is not None and snapshots is not None:
        run.check_optouts(corpus, sites)
    tok = run.stage("tokenizer", "afm.model.text.tokenizer", lambda: run.tokenizer(corpus))
    tokens = run.stage("tokenize", "afm.pipelines.tokenize", lambda: run.tokenize(corpus, tok))
    results = run.stage("train", "afm.training.core.trainer", lambda: run.train(tokens))
    final = (results or {}).get("tiny-context", {}).get("model_checkpoint")
    if final and tok is not None:
        run.stage("evaluate", "afm.evaluation.runner", lambda: run.evaluate(Path(final), tok, tokens, index))
    on_device = run.stage("prune + distill", "afm.training.tasks.prune", lambda: run.on_device(tokens))
    sft = None
    if results and tok:
        base = Path(results["tiny-context"]["workdir"]) / "model"
        sft = run.stage("sft", "afm.synth.prepare", lambda: run.sft(tok, index, base))
    safety = None
    if sft and tok:
        safety = run.stage("safety (keyword detector)", "afm.evaluation.posttrain.runner",
                           lambda: run.safety(run.workdir / "sft" / "run" / "best", tok))
    rm = None
    if sft and tok:
        sft_best = run.workdir / "sft" / "run" / "best"
        rm = run.stage("reward model", "afm.training.tasks.reward_model", lambda: run.reward_model(tok, sft_best))
    rl = None
    if sft and tok:
        rl = run.stage("mdloo", "afm.training.tasks.mdloo", lambda: run.mdloo(tok, run.workdir / "sft" / "run" / "best"))
    if final and tok is not None:  # the post-trained model when SFT ran, else the pre-trained one
        best = run.workdir / "sft" / "run" / "best"
        deployed = best if sft is not None and (best / "config.json").is_file() else Path(final)
        run.stage("quantize + recovery adapter", "afm.app.studies.recovery_demo",
                  lambda: run.quantize_and_recover(deployed, tok, tokens))

    rows: list[tuple[str, Any]] = list(run.outputs)
    manifest = getattr(run, "manifest", None)
    if isinstance(manifest, dict) and "totals" in manifest:
        for key, value in manifest["totals"].items():
            rows.append((f"documents {key}", value))
        for step in manifest.get("funnel", []):
            if step.get("dropped"):
                reasons = ", ".join(f"{r} {n}" for r, n in sorted(step.get("reasons", {}).items()))
                rows.append((f"dropped by {step['stage']}", f"{step['dropped']} ({reasons})"))
    if results:
        for stage, r in results.items():
            rows.append((f"{stage} loss", f"{r.get('first_loss', float('nan')):.3f} -> {r.get('final_loss', float('nan')):.3f}"))
    if on_device:
        t, p, s = on_device["teacher"], on_device["prune"], on_device["student"]
        rows.append(("tiny-teacher loss", f"{t.get('first_loss', float('nan')):.3f} -> {t.get('final_loss', float('nan')):.3f}"))
        rows.append(("tiny-prune held-out loss at the hard mask", f"{p.get('eval/heldout/loss', float('nan')):.3f}"))
        rows.append(("tiny-student loss (0.9 teacher top-1 + 0.1 label)", f"{s.get('first_loss', float('nan')):.3f} -> {s.get('final_loss', float('nan')):.3f}"))
    if sft:
        rows.append(("SFT held-out assistant loss", f"{sft['before']:.3f} (base) -> {sft['after']:.3f} (best SFT step)"))
        rows.append(("SFT data dropped", ", ".join(f"{k} {v}" for k, v in sorted(sft["dropped"].items()))))
    if safety:
        rate = {t: e["metrics"][e["primary"]]["value"] for t, e in safety.items()}
        rows.append(("SFT safety, keyword detector (toy scale)",
                     f"violation rate {rate['safety_harmbench']:.3f} (HarmBench), {rate['safety_xstest']:.3f} "
                     f"(XSTest unsafe); over-refusal {rate['overrefusal_xstest']:.3f} (XSTest safe); "
                     f"{safety['safety_harmbench']['samples']} prompts each"))
    if rm:
        rows.append(("RM held-out pairwise accuracy", f"{rm['accuracy']:.3f} over {rm['pairs']} pairs "
                     f"(significantly better: {rm['accuracy/significantly_better'] or float('nan'):.3f})"))
    if rl:
        rows.append(("MDLOO iteration", f"reward {rl['reward']:.3f}, KL to SFT {rl['kl_ref']:.4f}, "
                                        f"{rl['rollout_tokens_per_s']:.0f} tok/s sampling"))
    for name, seconds in run.timings:
        rows.append((f"time {name}", f"{seconds:.1f} s"))
    rows.append(("total time", f"{time.perf_counter() - start:.1f} s"))
    if run.skipped:
        rows.append(("stages not in this build", ", ".join(run.skipped)))
    print_summary("afm demo: outputs", rows)
    for label, path in run.outputs:
        click.echo(f"{label}: {path}")
    if getattr(run, "eval_results", None):
        from afm.evaluation.report import print_results

        print_results(run.eval_results)  # the evaluation of its checkpoint
    if getattr(run, "recovery", None):  # and its quantized + recovered versions beside it
        from afm.console import console

        console.rule("[bold cyan]quantized (palettized) vs 16-bit")
        click.echo(run.recovery["markdown"])

