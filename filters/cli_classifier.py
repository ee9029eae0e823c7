"""``afm classifier``: train and apply the fastText text classifiers used by the filters."""

from __future__ import annotations

import click

TRAIN_EPILOG = """\b
Examples:
  afm classifier train --positives unsafe.jsonl --negatives safe.jsonl --out safety.ftz
  afm classifier train --positives good.txt --negatives web.parquet --out quality.bin \\
      --epoch 20 --lr 0.5 --dim 64
  afm classifier train --positives a.jsonl --negatives b.jsonl --out m.ftz --text-field body

\b
Inputs: .jsonl/.jsonl.gz and .parquet (field --text-field), .txt (one document per line).
An output ending in .ftz is quantized (small enough to ship); .bin is kept full size.
Held-out precision/recall/F1 are printed and saved next to the model as MODEL.json.
"""

SCORE_EPILOG = """\b
Examples:
  afm classifier score --model safety.ftz docs.jsonl
  afm classifier score --model quality.bin --text-field text web.parquet > scores.tsv
"""


@click.group("classifier")
def classifier() -> None:
    """Train and apply fastText binary text classifiers (safety, quality, math...)."""


@classifier.command("train", epilog=TRAIN_EPILOG)
@click.option("--positives", "positives", multiple=True, required=True, help="File(s) of positive examples.")
@click.option("--negatives", "negatives", multiple=True, required=True, help="File(s) of negative examples.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Model path (.ftz or .bin).")
@click.option("--text-field", default="text", show_default=True, help="Field holding the text in JSONL/Parquet.")
@click.option("--label-pos", default="pos", show_default=True)
@click.option("--label-neg", default="neg", show_default=True)
@click.option("--epoch", default=10, show_default=True, type=int)
@click.option("--lr", default=0.2, show_default=True, type=float)
@click.option("--word-ngrams", default=2, show_default=True, type=int)
@click.option("--dim", default=32, show_default=True, type=int)
@click.option("--held-out", default=0.1, show_default=True, type=float, help="Share of each class kept for evaluation.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--max-per-class", default=0, show_default=True, type=int, help="Cap examples per class (0 = all).")
def train_cmd(
    positives: tuple[str, ...],
    negatives: tuple[str, ...],
    out: str,
    text_field: str,
    label_pos: str,
    label_neg: str,
    epoch: int,
    lr: float,
    word_ngrams: int,
    dim: int,
    held_out: float,
    seed: int,
    max_per_class: int,
) -> None:
    """Train a binary classifier and print its held-out precision/recall."""
    import itertools
    from pathlib import Path

    from afm.filters.classifier import ClassifierError, read_texts, train_classifier

    from afm.console import console, print_summary

    try:
        limit = max_per_class or None
        pos = list(itertools.islice(read_texts(positives, text_field), limit))
        neg = list(itertools.islice(read_texts(negatives, text_field), limit))
        console.print(f"read {len(pos):,} positive and {len(neg):,} negative texts")
        report = train_classifier(
            pos,
            neg,
            Path(out),
            label_pos=label_pos,
            label_neg=label_neg,
            epoch=epoch,
            lr=lr,
            wordNgrams=word_ngrams,
            dim=dim,
            held_out=held_out,
            seed=seed,
        )
    except ClassifierError as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("classifier train", {"model": report["model"], "size (bytes)": report["size_bytes"]})


@classifier.command("score", epilog=SCORE_EPILOG)
@click.option("--model", "model_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--text-field", default="text", show_default=True)
@click.argument("inputs", nargs=-1, required=True)
def score_cmd(model_path: str, text_field: str, inputs: tuple[str, ...]) -> None:
    """Print `score<TAB>first 80 chars` for every document of INPUTS."""
    from afm.filters.classifier import ClassifierError, FastTextClassifier, read_texts

    from afm.console import print_summary, track

    try:
        clf = FastTextClassifier(model_path)
        texts = list(read_texts(inputs, text_field))
    except ClassifierError as exc:
        raise click.ClickException(str(exc)) from exc
    total = 0.0
    for text in track(texts, "scoring", unit="docs"):
        score = clf.score_one(text)
        total += score
        snippet = " ".join(text.split())[:80]
        click.echo(f"{score:.4f}\t{snippet}")
    print_summary("classifier score", {"documents": len(texts), "mean score": total / max(len(texts), 1)})


COMMANDS = [classifier]
