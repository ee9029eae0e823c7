"""``afm classifier``: train and apply the fastText text classifiers used by the filters."""

from __future__ import annotations

import click

from afm.options import POSITIVE, Number

TRAIN_EPILOG = """\b
Examples:
  afm classifier train --positives unsafe.jsonl --negatives safe.jsonl --out safety.ftz
  afm classifier train --positives good.txt --negatives web.parquet --out quality.bin \\
      --epoch 20 --lr 0.5 --dim 64
  afm classifier train --positives a.jsonl --negatives b.jsonl --out m.ftz --text-field body

\b
Inputs: .jsonl/.jsonl.gz and .parquet (field --text-field), .txt (one document per line).
Repeat --positives/--negatives for several files, or give a folder or a quoted glob.
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
@click.option("--lr", default=0.2, show_default=True, type=POSITIVE)
@click.option("--word-ngrams", default=2, show_default=True, type=int)
@click.option("--dim", default=32, show_default=True, type=int)
@click.option("--held-out", default=0.1, show_default=True, type=Number(0, 1, max_open=True), help="Share of each class kept for evaluation.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--no-punctuation", is_flag=True, help="Remove punctuation before training and scoring.")
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
    no_punctuation: bool,
    max_per_class: int,
) -> None:
    """Train a binary classifier and print its held-out precision/recall."""
    import itertools
    from pathlib import Path

    from afm.filters.classifier import ClassifierError, read_texts, train_classifier

    from afm.console import console, print_summary
    from afm.io import expand_inputs

    try:
        limit = max_per_class or None
        pos_files, neg_files = expand_inputs(positives), expand_inputs(negatives)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        pos = list(itertools.islice(read_texts(pos_files, text_field), limit))
        neg = list(itertools.islice(read_texts(neg_files, text_field), limit))
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
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--overwrite", is_flag=True, help="Replace what OUT holds.")
def make_safety_data_cmd(out_dir: str, n_per_class: int, seed: int, overwrite: bool) -> None:
    """Write the synthetic safety training data (unsafe.jsonl.gz, safe.jsonl.gz) to OUT."""
    import gzip
    import json
    from pathlib import Path

    from afm.filters.safety import make_safety_training_data

    from afm.console import print_summary

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
