"""``afm quality``: run the quality stage on files, and LLM-guided labelling.

(``afm classifier train`` trains any fastText classifier; this group holds what is
specific to quality: heuristics + model over a corpus, and scorer-guided labelling.)
"""

from __future__ import annotations

import click

FILTER_EPILOG = """\b
Examples:
  afm quality filter docs.parquet --output out/
  afm quality filter crawl/*.jsonl --output out/ --top-fraction 0.3
  afm quality filter docs.parquet --output out/ --no-model --set fineweb=false
  afm quality filter docs.parquet --output out/ --model my_quality.ftz --threshold 0.7

\b
Writes OUTPUT/kept.parquet and OUTPUT/rejects.parquet (every dropped document with the
rule that dropped it). --top-fraction keeps that share of the documents that passed the
heuristics, by a corpus-wide percentile of the model score (two passes).
--set KEY=VALUE overrides a QualityConfig field (e.g. min_doc_words=100).
"""

LABEL_EPILOG = """\b
Examples:
  afm quality label web.parquet --reference wiki.jsonl --out quality_lm.ftz
  afm quality label web.parquet --scorer mypkg.scorers:make_llm_scorer --out q.ftz \\
      --sample 20000 --pos-fraction 0.2 --neg-fraction 0.5 --labels-out labels.jsonl

\b
LLM-guided selection: score a random sample of INPUTS with a scoring model (a word-bigram
LM fitted on --reference text, or your own model via --scorer module:attr, any object
with score(texts) -> list[float]), label the top / bottom of the sample positive /
negative, and train the fast fastText classifier on those labels. The held-out metrics
printed are the fast classifier's agreement with the scorer's labels.
"""


@click.group("quality")
def quality() -> None:
    """Quality filtering: Gopher/C4/FineWeb heuristics + fastText model, LLM-guided labels."""


@quality.command("filter", epilog=FILTER_EPILOG)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--model", "model_path", default=None, help="fastText quality model (default: the shipped one).")
@click.option("--no-model", is_flag=True, help="Heuristics only.")
@click.option("--no-heuristics", is_flag=True, help="Model only.")
@click.option("--threshold", type=float, default=None, help="Drop when the model score is below this.")
@click.option("--top-fraction", type=float, default=None, help="Keep this share by a global percentile.")
@click.option("--set", "overrides", multiple=True, help="QualityConfig override KEY=VALUE.")
def filter_cmd(
    inputs: tuple[str, ...],
    output: str,
    model_path: str | None,
    no_model: bool,
    no_heuristics: bool,
    threshold: float | None,
    top_fraction: float | None,
    overrides: tuple[str, ...],
) -> None:
    """Run the quality heuristics and the quality model over documents."""
    from collections import Counter
    from pathlib import Path

    from afm.filters.base import apply_filter
    from afm.filters.quality import QualityConfig, QualityHeuristicsFilter
    from afm.filters.quality_model import (
        QualityClassifierFilter,
        QualityModelConfig,
        QualityScoreCut,
        score_threshold_for_top_fraction,
    )

    from afm.config import ConfigError, load_config, print_config
    from afm.console import print_summary, track
    from afm.io import expand_inputs, read_records, write_parquet
    from afm.schema import REJECT_SCHEMA

    try:
        hcfg = load_config(QualityConfig, None, overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    mcfg = QualityModelConfig(top_fraction=top_fraction)
    if model_path:
        mcfg.model_path = model_path
    if no_model:
        mcfg.model_path = None
    if threshold is not None:
        mcfg.threshold = threshold
    if not no_heuristics:
        print_config(hcfg, "quality heuristics")
    print_config(mcfg, "quality model")
    try:
        files = expand_inputs(inputs)
        model = QualityClassifierFilter(mcfg)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    heur = None if no_heuristics else QualityHeuristicsFilter(hcfg)

    kept: list[dict] = []
    rejects: list[dict] = []
    n_in = 0
    docs = (rec for f in files for rec in read_records(f))
    for doc in track(docs, "quality", unit="docs"):
        n_in += 1
        if heur is not None:
            doc, rej = apply_filter(heur, doc)
            if rej is not None:
                rejects.append(rej)
                continue
        doc, rej = apply_filter(model, doc)  # type: ignore[arg-type]
        if rej is not None:
            rejects.append(rej)
            continue
        kept.append(doc)  # type: ignore[arg-type]
    cut = None
    if top_fraction is not None and mcfg.model_path is not None and kept:
        cut = score_threshold_for_top_fraction([d["quality_score"] for d in kept], top_fraction)
        cutter = QualityScoreCut(cut)
        survivors = []
        for doc in kept:
            out, rej = apply_filter(cutter, doc)
            if rej is not None:
                rejects.append(rej)
            else:
                survivors.append(out)
        kept = survivors
    out_dir = Path(output)
    write_parquet(kept, out_dir / "kept.parquet")
    write_parquet(rejects, out_dir / "rejects.parquet", schema=REJECT_SCHEMA)
    reasons = Counter(r["reason"] for r in rejects)
    rows: dict[str, object] = {"documents in": n_in, "kept": len(kept), "rejected": len(rejects)}
    if cut is not None:
        rows["top-fraction score cut"] = cut
    rows.update({f"  {reason}": n for reason, n in reasons.most_common()})
    rows["output"] = str(out_dir)
    print_summary("afm quality filter", rows)


@quality.command("label", epilog=LABEL_EPILOG)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="fastText model to write (.ftz/.bin).")
@click.option("--reference", multiple=True, help="Reference text file(s) for the built-in n-gram LM scorer.")
@click.option("--scorer", "scorer_spec", default=None, help="Your scorer as module:attribute.")
@click.option("--text-field", default="text", show_default=True)
@click.option("--sample", "sample_size", default=10_000, show_default=True, type=int)
@click.option("--pos-fraction", default=0.3, show_default=True, type=float)
@click.option("--neg-fraction", default=0.3, show_default=True, type=float)
@click.option("--labels-out", default=None, type=click.Path(dir_okay=False), help="Write the labelled sample (JSONL).")
@click.option("--epoch", default=10, show_default=True, type=int)
@click.option("--lr", default=0.2, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
def label_cmd(
    inputs: tuple[str, ...],
    out: str,
    reference: tuple[str, ...],
    scorer_spec: str | None,
    text_field: str,
    sample_size: int,
    pos_fraction: float,
    neg_fraction: float,
    labels_out: str | None,
    epoch: int,
    lr: float,
    seed: int,
) -> None:
    """Label a sample with a scoring model and train the fast classifier on the labels."""

    from afm.filters.classifier import ClassifierError, read_texts
    from afm.filters.quality_model import (
        NGramLMScorer,
        llm_guided_selection,
        load_scorer,
    )

    from afm.console import console, print_summary
    from afm.io import expand_inputs

    if bool(reference) == bool(scorer_spec):
        raise click.UsageError("give exactly one of --reference (built-in LM scorer) or --scorer")
    try:
        files = expand_inputs(inputs)
        if scorer_spec:
            scorer = load_scorer(scorer_spec)
        else:
            console.print(f"fitting the word-bigram LM scorer on {len(reference)} reference file(s)")
            scorer = NGramLMScorer().fit(read_texts(expand_inputs(reference), text_field))
        report = llm_guided_selection(
            read_texts(files, text_field), scorer, out, sample_size=sample_size, seed=seed,
            pos_fraction=pos_fraction, neg_fraction=neg_fraction, labels_out=labels_out,
            epoch=epoch, lr=lr, progress=True,
        )
    except (ClassifierError, ValueError, TypeError, ImportError, AttributeError) as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("afm quality label", {
        "sampled": report["sampled"],
        "labelled positive": report["labelled_positive"],
        "labelled negative": report["labelled_negative"],
        "unlabelled (uncertain)": report["unlabelled"],
        "positive threshold": report["pos_threshold"],
        "negative threshold": report["neg_threshold"],
        "held-out accuracy vs scorer labels": report["accuracy"],
        "model": report["model"],
    })


COMMANDS = [quality]
