"""``afm classifier``: train and apply the fastText text classifiers used by the filters."""

from __future__ import annotations

import click

from afm.app.commands.options import POSITIVE, POSITIVE_INT, SEED, Number

TRAIN_EPILOG = """\b
Examples:
  afm classifier train --positives unsafe.jsonl --negatives safe.jsonl --out safety.ftz
  afm classifier train --positives good.txt --negatives web.parquet --out quality.bin \\
      --epoch 20 --lr 0.5 --dim 64
  afm classifier train --positives a.jsonl --negatives b.jsonl --out m.ftz --text-field body
  afm classifier train --labels edu_labels.jsonl --out edu.ftz          # a judge's labels
  afm classifier train --labels edu_labels.jsonl --positive-from 4 --out edu4.ftz

\b
Inputs: .jsonl/.jsonl.gz and .parquet (field --text-field), .txt (one document per line).
--labels reads labelled records instead (what `afm quality annotate` writes): the field
`label` says pos / neg (--label-pos / --label-neg), or with --positive-from N the field
`score` decides (score >= N positive); records with neither are skipped and counted.
Repeat --positives/--negatives for several files, or give a folder or a quoted glob.
An output ending in .ftz is quantized (small enough to ship); .bin is kept full size.
Held-out precision/recall/F1 are printed and saved next to the model as MODEL.json.
"""

SCORE_EPILOG = """\b
Examples:
  afm classifier score --model safety.ftz docs.jsonl
  afm classifier score --model quality.bin --text-field text web.parquet > scores.tsv
  afm classifier score --model dclm.bin --label-pos hq docs.jsonl
  afm classifier score --model fineweb-edu-classifier/ docs.jsonl    # Hugging Face (hf extra)
"""


@click.group("classifier")
def classifier() -> None:
    """Train and apply fastText binary text classifiers (safety, quality, math...)."""


@classifier.command("train", epilog=TRAIN_EPILOG)
@click.option("--positives", "positives", multiple=True, help="File(s) of positive examples.")
@click.option("--negatives", "negatives", multiple=True, help="File(s) of negative examples.")
@click.option("--labels", "labels", multiple=True, help="Labelled file(s) instead (afm quality annotate).")
@click.option("--positive-from", type=Number(), default=None,
              help="With --labels: score >= this is positive (default: the label field).")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Model path (.ftz or .bin).")
@click.option("--text-field", default="text", show_default=True, help="Field holding the text in JSONL/Parquet.")
@click.option("--label-pos", default="pos", show_default=True)
@click.option("--label-neg", default="neg", show_default=True)
@click.option("--epoch", default=10, show_default=True, type=int)
@click.option("--lr", default=0.2, show_default=True, type=POSITIVE)
@click.option("--word-ngrams", default=2, show_default=True, type=int)
@click.option("--dim", default=32, show_default=True, type=int)
@click.option("--held-out", default=0.1, show_default=True, type=Number(0, 1, max_open=True), help="Share of each class kept for evaluation.")
@click.option("--seed", default=0, show_default=True, type=SEED)
@click.option("--no-punctuation", is_flag=True, help="Remove punctuation before training and scoring.")
@click.option("--max-per-class", default=0, show_default=True, type=int, help="Cap examples per class (0 = all).")
def train_cmd(
    positives: tuple[str, ...],
    negatives: tuple[str, ...],
    labels: tuple[str, ...],
    positive_from: float | None,
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
    no_punctuation: bool,
    max_per_class: int,
) -> None:
    """Train a binary classifier and print its held-out precision/recall."""
    import itertools
    from pathlib import Path

    from afm.console import console, print_summary
    from afm.filters.classifier import ClassifierError, read_texts, train_classifier
    from afm.io import expand_inputs

    if labels and (positives or negatives):
        raise click.UsageError("give --labels, or --positives and --negatives, not both")
    if not labels and not (positives and negatives):
        raise click.UsageError("give --positives and --negatives, or --labels")
    if positive_from is not None and not labels:
        raise click.UsageError("--positive-from goes with --labels")
    limit = max_per_class or None
    try:
        if labels:
            from afm.filters.classifier import read_labelled

            pos, neg, skipped = read_labelled(expand_inputs(labels), text_field=text_field,
                                              label_pos=label_pos, label_neg=label_neg,
                                              positive_from=positive_from)
            pos, neg = pos[:limit], neg[:limit]
            if skipped:
                console.print(f"skipped {skipped:,} records without a usable label")
        else:
            pos_files, neg_files = expand_inputs(positives), expand_inputs(negatives)
            pos = list(itertools.islice(read_texts(pos_files, text_field), limit))
            neg = list(itertools.islice(read_texts(neg_files, text_field), limit))
    except (FileNotFoundError, ClassifierError) as exc:  # a missing or undecodable file: one line
        raise click.ClickException(str(exc)) from exc
    try:
        if pos and neg:  # otherwise the error says the counts
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
            punctuation=not no_punctuation,
        )
    except ClassifierError as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("classifier train", {"model": report["model"], "size (bytes)": report["size_bytes"]})


@classifier.command("score", epilog=SCORE_EPILOG)
@click.option("--model", "model_path", required=True, type=click.Path(exists=True),
              help="fastText file, or Hugging Face classification / regression directory.")
@click.option("--label-pos", default=None, help="Positive label of a model trained elsewhere (e.g. hq).")
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE_INT)
@click.option("--text-field", default="text", show_default=True)
@click.argument("inputs", nargs=-1, required=True)
def score_cmd(model_path: str, label_pos: str | None, batch_size: int, text_field: str,
              inputs: tuple[str, ...]) -> None:
    """Print `score<TAB>first 80 chars` for every document of INPUTS."""
    from afm.console import print_summary, track
    from afm.filters.classifier import ClassifierError, read_texts
    from afm.filters.quality.scorers import ScorerError, open_scorer

    try:
        scorer = open_scorer(model_path, label_pos=label_pos, batch_size=batch_size)
        texts = list(read_texts(inputs, text_field))
    except (ClassifierError, ScorerError) as exc:
        raise click.ClickException(str(exc)) from exc
    total = 0.0
    starts = range(0, len(texts), batch_size)
    for start in track(starts, f"scoring ({batch_size}/batch)", unit="batches"):
        batch = texts[start: start + batch_size]
        for text, score in zip(batch, scorer.score(batch)):
            total += float(score)
            snippet = " ".join(text.split())[:80]
            click.echo(f"{float(score):.4f}\t{snippet}")
    print_summary("classifier score", {"documents": len(texts), "mean score": total / max(len(texts), 1)})


MAKE_SAFETY_EPILOG = """\b
Examples:
  afm classifier make-safety-data --out filters/data/safety/train
  afm classifier train --positives filters/data/safety/train/unsafe.jsonl.gz \\
      --negatives filters/data/safety/train/safe.jsonl.gz \\
      --out filters/data/safety/safety.ftz --label-pos unsafe --label-neg safe \\
      --dim 16 --no-punctuation
"""


@classifier.command("make-safety-data", epilog=MAKE_SAFETY_EPILOG)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option("--n-per-class", default=1000, show_default=True, type=int)
@click.option("--seed", default=0, show_default=True, type=SEED)
@click.option("--overwrite", is_flag=True, help="Replace what OUT holds.")
def make_safety_data_cmd(out_dir: str, n_per_class: int, seed: int, overwrite: bool) -> None:
    """Write the synthetic safety training data (unsafe.jsonl.gz, safe.jsonl.gz) to OUT."""
    import gzip
    import json
    from pathlib import Path

    from afm.console import print_summary
    from afm.filters.safety import make_safety_training_data

    if n_per_class < 2:
        raise click.BadParameter("needs at least 2 documents per class", param_hint="--n-per-class")
    from afm.outputs import OutputError, write_directory

    unsafe, safe = make_safety_training_data(n_per_class, seed)
    out = Path(out_dir)

    def write(staging: str) -> None:
        for name, texts in (("unsafe", unsafe), ("safe", safe)):
            # mtime=0: the same seed gives byte-identical files.
            lines = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
            with gzip.GzipFile(Path(staging) / f"{name}.jsonl.gz", "wb", mtime=0) as fh:
                fh.write(lines.encode("utf-8"))

    try:
        write_directory(out, write, overwrite=overwrite, manifest={"command": "classifier make-safety-data"})
    except OutputError as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("make-safety-data", {"unsafe": len(unsafe), "safe": len(safe), "folder": str(out)})


COMMANDS = [classifier]
