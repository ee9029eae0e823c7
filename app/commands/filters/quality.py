"""``afm quality``: run the quality stage on files, and LLM-guided labelling.

(``afm classifier train`` trains any fastText classifier; this group holds what is
specific to quality: heuristics + model over a corpus, and scorer-guided labelling.)
"""

from __future__ import annotations

import click

from afm.options import FRACTION, POSITIVE, PROBABILITY_OPEN, SEED

FILTER_EPILOG = """\b
Examples:
  afm quality filter docs.parquet --output out/
  afm quality filter crawl/*.jsonl --output out/ --top-fraction 0.3
  afm quality filter docs.parquet --output out/ --no-model --set fineweb=false
  afm quality filter docs.parquet --output out/ --model my_quality.ftz --threshold 0.7

\b
Runs on the curate engine: writes OUTPUT/documents-NNNNN.parquet, OUTPUT/rejects-NNNNN.parquet
(every dropped document with the stage and rule that dropped it, and every unreadable
record), OUTPUT/manifest.json, OUTPUT/report.html and OUTPUT/_SUCCESS. --top-fraction keeps that share of the documents that passed the
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
@click.option("--threshold", type=FRACTION, default=None, help="Drop when the model score is below this.")
@click.option("--top-fraction", type=PROBABILITY_OPEN, default=None,
              help="Keep this share by a global percentile.")
@click.option("--set", "overrides", multiple=True, help="QualityConfig override KEY=VALUE.")
@click.option("--overwrite", is_flag=True,
              help="Replace what OUTPUT holds (kept until the new run has succeeded).")
@click.option("--allow-empty", is_flag=True,
              help="Write the output even when the inputs yield no document (default: an error, "
                   "nothing written).")
def filter_cmd(
    inputs: tuple[str, ...],
    output: str,
    model_path: str | None,
    no_model: bool,
    no_heuristics: bool,
    threshold: float | None,
    top_fraction: float | None,
    overrides: tuple[str, ...],
    overwrite: bool,
    allow_empty: bool,
) -> None:
    """Run the quality heuristics and the quality model over documents.

    The two stages run on the curate engine, so the input boundary (damaged files and
    rows become recorded rejects), the output policy and the accounting are the same as
    for ``afm curate``, ``afm dedup`` and ``afm decontam run``.
    """
    from afm.app.commands.pipelines.usage import user_errors
    from afm.pipelines.curate.pipeline import run_curate

    from afm.config import ConfigError, parse_overrides

    if no_model and no_heuristics:
        raise click.UsageError("--no-model and --no-heuristics together leave nothing to run")
    if no_model and (model_path or threshold is not None or top_fraction is not None):
        raise click.UsageError("--model / --threshold / --top-fraction need the model (drop --no-model)")
    try:
        heuristics = parse_overrides(overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    model: dict[str, object] = {"top_fraction": top_fraction}
    if model_path:
        model["model_path"] = model_path
    if threshold is not None:
        model["threshold"] = threshold
    stages = ([] if no_heuristics else ["quality"]) + ([] if no_model else ["quality_model"])
    config = {"stages": stages, "quality": {"params": heuristics},
              "quality_model": {"params": model}}
    with user_errors():
        run_curate(list(inputs), output, command="quality filter", overwrite=overwrite,
                   config=config, allow_empty=allow_empty,
                   pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])


@quality.command("label", epilog=LABEL_EPILOG)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="fastText model to write (.ftz/.bin).")
@click.option("--reference", multiple=True, help="Reference text file(s) for the built-in n-gram LM scorer.")
@click.option("--scorer", "scorer_spec", default=None, help="Your scorer as module:attribute.")
@click.option("--text-field", default="text", show_default=True)
@click.option("--sample", "sample_size", default=10_000, show_default=True, type=int)
@click.option("--pos-fraction", default=0.3, show_default=True, type=FRACTION)
@click.option("--neg-fraction", default=0.3, show_default=True, type=FRACTION)
@click.option("--labels-out", default=None, type=click.Path(dir_okay=False), help="Write the labelled sample (JSONL).")
@click.option("--epoch", default=10, show_default=True, type=int)
@click.option("--lr", default=0.2, show_default=True, type=POSITIVE)
@click.option("--seed", default=0, show_default=True, type=SEED)
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
