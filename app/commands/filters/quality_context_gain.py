"""``afm quality train-context-gain``'s work: the chain rule's word model made on the one
trainer and handed to the quality rule as numpy arrays.

It lives in the app because it joins two columns of the project: the development texts,
the vocabulary and the rule's threshold are the filters' (:mod:`afm.filters.quality.
context_gain_train`), the training is the trainer's (stage ``context-gain``, task
``context_gain``), and the filters layer may not import training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from afm.console import console, print_summary
from afm.filters.extraction.gold import load_wcxb_all
from afm.filters.quality.audit import run_chain, write_sidecar
from afm.filters.quality.context_gain import Shape, build_vocabulary, model_arrays
from afm.filters.quality.context_gain_train import development_report, token_rows
from afm.filters.quality.defaults import DEVELOPMENT_HELD_OUT as HELD_OUT
from afm.filters.quality.defaults import development_split
from afm.outputs import write_directory
from afm.pipelines.curate.stages import document_filters
from afm.training.core.checkpoint import checkpoint_model_config, read_run_params, resolve_init_from
from afm.training.data.shards import write_token_shard
from afm.training.runs.train import train

STAGE = "context-gain"


def write_shards(texts: list[Any], workdir: Path, settings: dict[str, Any]) -> list[str]:
    """The vocabulary (``vocabulary.txt``) and the token shards of ``texts`` under
    ``workdir`` (written once; a resumed run reads the same ones, and a workdir made from
    other inputs, ``settings``, is refused rather than mixed)."""
    shards, vocab_file, settings_file = workdir / "shards", workdir / "vocabulary.txt", workdir / "inputs.json"
    if vocab_file.is_file() and (shards / "_SUCCESS").is_file():
        before = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else None
        if before != settings:
            raise click.ClickException(f"{workdir} holds a run made from other inputs ({before}, now {settings}): "
                                       "use another --workdir")
        return vocab_file.read_text(encoding="utf-8").split("\n")
    vocabulary = build_vocabulary(t.text for t in texts)
    rows = token_rows(texts, vocabulary)
    write_directory(str(shards), lambda staging: write_token_shard(rows, Path(staging) / "tokens-00000.parquet"),
                    overwrite=True, manifest={"command": "quality train-context-gain"})
    vocab_file.write_text("\n".join(vocabulary), encoding="utf-8")
    settings_file.write_text(json.dumps(settings), encoding="utf-8")
    return vocabulary


def export(run_dir: Path, vocabulary: list[str], out: Path) -> dict[str, Any]:
    """The run's last checkpoint as the rule's ``.npz`` (its weights, shape, vocabulary)."""
    directory, step = resolve_init_from(run_dir)
    cfg = checkpoint_model_config(str(run_dir))
    if cfg.vocab_size != len(vocabulary):
        raise ValueError(f"{run_dir}: the model has {cfg.vocab_size} tokens, the vocabulary {len(vocabulary)}")
    params = read_run_params(directory / str(step))
    shape = Shape(dim=cfg.dim, n_layers=cfg.n_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
                  head_dim=cfg.head_dim, norm_eps=cfg.norm_eps, rope_base=cfg.rope_base)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **model_arrays(params, shape, vocabulary))
    return {"step": step, "parameters": int(sum(v.size for v in params.values())), "bytes": out.stat().st_size,
            "final_loss": last_loss(run_dir)}


def last_loss(run_dir: Path) -> float | None:
    """The training loss of the run's last logged step (``metrics.jsonl``), whether or not
    this call trained (a finished run resumed trains nothing)."""
    metrics = run_dir / "metrics.jsonl"
    lines = metrics.read_text(encoding="utf-8").splitlines() if metrics.is_file() else []
    losses = [row["loss"] for row in map(json.loads, lines) if "loss" in row]
    return round(float(losses[-1]), 4) if losses else None


def train_context_gain(wcxb: Path, workdir: Path, out: Path, *, steps: int | None = None, technical: bool = True,
                       per_kind: int = 300) -> dict[str, Any]:
    """Write the shards, train (or resume) the stage, export it and choose its threshold;
    returns the development report (also in ``OUT.json``)."""
    console.print("reading WCXB's pages (dev and test splits)" + (" and this machine's documentation" if technical else ""))
    split = development_split(load_wcxb_all(wcxb), technical=technical)
    train_texts = [*split.train, *split.tech_train]
    vocabulary = write_shards(train_texts, workdir, {"wcxb": str(wcxb.resolve()), "technical": technical})
    console.print(f"training on {len(train_texts):,} texts ({len(split.good):,} held-out texts choose the threshold)")
    overrides = [f"total_steps={steps}"] if steps else []
    train(STAGE, workdir / "run", data=[str(workdir / "shards")], overrides=overrides)
    info = export(workdir / "run", vocabulary, out)
    others = document_filters({"quality": {"context_gain_model": None}})
    console.print(f"scoring the development good texts and {per_kind} junk texts of each kind")
    report = development_report(out, split.good, split.held, split.boilerplate,
                                lambda items: [o.kept for o in run_chain(others, items)], per_kind=per_kind)
    info.update(report, stage=STAGE, sources=[
        {"set": "WCXB dev and test splits (article, forum, documentation, service pages)",
         "where": "Murrough-Foley/web-content-extraction-benchmark, dev/ and test/", "licence": "CC-BY-4.0",
         "use": f"the model ({1 - HELD_OUT:.0%} of sites); the threshold ({HELD_OUT:.0%})"},
        {"set": "this machine's package docs, READMEs and manual pages" if technical else "none",
         "use": f"the model ({1 - HELD_OUT:.0%} of documents); the threshold ({HELD_OUT:.0%})"}])
    side = write_sidecar(out, info)
    print_summary("afm quality train-context-gain", {
        "model": str(out), "bytes": info["bytes"], "parameters": info["parameters"], "trained steps": info["step"],
        "threshold (min_context_gain)": report["threshold"], "metadata": str(side)})
    return report
