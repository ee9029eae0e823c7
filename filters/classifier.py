"""Generic fastText binary text classifiers: train, evaluate on a held-out split, score.

Several filters (safety, quality, math) use the same recipe: a linear bag-of-n-grams
classifier (fastText, as DCLM / FineWeb-Edu style filters do) trained on a few thousand
labelled documents, shipped small, and scored in batches. This module holds that recipe
once, so every classifier shares one text preprocessing (train and predict must see text
the same way, or scores silently drift) and one evaluation report.

A model ``X.ftz``/``X.bin`` is saved with a sidecar ``X.ftz.json`` holding its positive
label and held-out metrics, so a loader never has to guess which label means "positive".
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from afm import fs
from afm.console import print_summary
from afm.io import read_records

# fastText reads one example per line, tokens split on whitespace. Splitting punctuation
# off words ("hello," -> "hello ,") lets "hello" share one embedding in both spellings.
_PUNCT = re.compile(r"([^\w\s])")
_NON_WORD = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")
MAX_CHARS = 20_000  # documents are truncated: the head carries the signal, cost stays bounded


class ClassifierError(RuntimeError):
    """Training or loading a classifier failed for a reason the user can act on."""


def preprocess(text: str, max_chars: int = MAX_CHARS, *, punctuation: bool = True) -> str:
    """The one text normalisation used by training and scoring: lowercase, punctuation
    split off words (or removed when ``punctuation`` is False), every whitespace run
    (newlines included) folded to one space."""
    text = (text or "")[:max_chars].lower().replace("__label__", " label ")  # no text is a label
    text = _PUNCT.sub(r" \1 ", text) if punctuation else _NON_WORD.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


def preprocess_joined(lines: Sequence[str]) -> list[str]:
    """:func:`preprocess`'s lower-casing and punctuation split of each of ``lines`` (each
    under :data:`MAX_CHARS`, none holding a newline) in one pass over them joined by
    newlines; whitespace is not folded (``str.split`` reads the tokens the same)."""
    if not lines:
        return []
    joined = "\n".join(lines).lower().replace("__label__", " label ")
    return _PUNCT.sub(r" \1 ", joined).split("\n")


# How a model's training text was prepared, so scoring prepares text the same way:
# ``afm`` is :func:`preprocess` (every model ``train_classifier`` writes); ``raw`` is the
# text with its lines joined by spaces and nothing else changed, as DCLM's fastText
# filter and datatrove's ``FastTextClassifierFilter`` feed their models (the preparation
# of a model trained elsewhere, e.g. DCLM's ``__label__hq`` / ``__label__cc`` classifier).
PREPROCESS_MODES = ("afm", "raw")


def preprocess_raw(text: str, max_chars: int = MAX_CHARS) -> str:
    """DCLM's preparation: the stripped text's lines joined with single spaces (fastText
    reads one example per line), case and punctuation left as they are."""
    # A token starting with __label__ would be read as a label by fastText.
    return " ".join((text or "")[:max_chars].strip().replace("__label__", "_label_").splitlines())


def metadata_path(model_path: str | os.PathLike[str]) -> Path:
    """Where the sidecar metadata of a model lives (``model.ftz`` -> ``model.ftz.json``)."""
    p = Path(model_path)
    return p.with_name(p.name + ".json")


def load_fasttext() -> Any:
    """The ``fasttext`` module, its notice on stderr silenced: the one way every fastText
    model of the filters is loaded (these classifiers, the language-ID model), so a host
    without the curate extra gets the same one-line answer whichever needs it first."""
    try:
        import fasttext
    except ImportError as exc:  # pragma: no cover - depends on the host's extras
        raise ClassifierError(
            "fastText is not installed; install the curate extra: pip install 'afm[curate]'"
        ) from exc
    # The wrapper warns on stderr that load_model's API changed; nothing to act on.
    fasttext.FastText.eprint = lambda *_args, **_kw: None
    return fasttext


def binary_metrics(scores: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    """Precision, recall, accuracy and F1 of ``scores >= threshold`` against 0/1 labels."""
    pred = scores >= threshold
    truth = labels.astype(bool)
    tp = float(np.sum(pred & truth))
    fp = float(np.sum(pred & ~truth))
    fn = float(np.sum(~pred & truth))
    n = max(len(truth), 1)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = float(np.sum(pred == truth)) / n
    return {"precision": precision, "recall": recall, "accuracy": accuracy, "f1": f1}


def _split(
    items: list[str], held_out: float, rng: random.Random
) -> tuple[list[str], list[str]]:
    """Shuffle and cut off a held-out share (at least one item when there are two or more)."""
    items = list(items)
    rng.shuffle(items)
    if held_out <= 0 or len(items) < 2:
        return items, []
    n_test = min(max(1, round(len(items) * held_out)), len(items) - 1)
    return items[n_test:], items[:n_test]


def train_classifier(
    positives: list[str],
    negatives: list[str],
    out: str | os.PathLike[str],
    *,
    label_pos: str = "pos",
    label_neg: str = "neg",
    epoch: int = 10,
    lr: float = 0.2,
    wordNgrams: int = 2,  # noqa: N803 - fastText's own parameter name
    dim: int = 32,
    held_out: float = 0.1,
    seed: int = 0,
    min_count: int = 1,
    bucket: int = 200_000,
    quantize: bool | None = None,
    quantize_cutoff: int = 20_000,
    threshold: float = 0.5,
    punctuation: bool = True,
    verbose: bool = True,
) -> dict[str, Any]:
    """Train a binary fastText classifier, report held-out metrics, save it to ``out``.

    Each class is split separately (stratified) with ``held_out`` of it kept for
    evaluation. ``quantize`` (default: when ``out`` ends in ``.ftz``) compresses the
    model (product quantization, the ``quantize_cutoff`` highest-norm embedding rows kept)
    to a few hundred KB, small enough to ship in the repository.

    Returns (and prints when ``verbose``) ``{"precision", "recall", "accuracy", "f1",
    "n_train", "n_test", ...}``; metrics are NaN when the held-out split is empty.
    Raises :class:`ClassifierError` for empty/degenerate data or a diverged run.
    """
    out = Path(out)
    if label_pos == label_neg:
        raise ClassifierError("label_pos and label_neg must differ")
    for name, label in (("label_pos", label_pos), ("label_neg", label_neg)):
        if not label or _SPACE.search(label):
            raise ClassifierError(f"{name} must be a non-empty word without spaces, got {label!r}")
    pos = [t for t in (preprocess(x, punctuation=punctuation) for x in positives) if t]
    neg = [t for t in (preprocess(x, punctuation=punctuation) for x in negatives) if t]
    if not pos or not neg:
        raise ClassifierError(
            f"need non-empty texts of both classes; got {len(pos)} positive and {len(neg)} "
            f"negative (of {len(positives)} and {len(negatives)} given)"
        )
    if not 0 <= held_out < 1:
        raise ClassifierError(f"held_out must be in [0, 1), got {held_out}")

    rng = random.Random(seed)
    pos_train, pos_test = _split(pos, held_out, rng)
    neg_train, neg_test = _split(neg, held_out, rng)
    train = [(label_pos, t) for t in pos_train] + [(label_neg, t) for t in neg_train]
    rng.shuffle(train)

    fasttext = load_fasttext()
    out.parent.mkdir(parents=True, exist_ok=True)
    quantize = out.suffix == ".ftz" if quantize is None else quantize
    with tempfile.TemporaryDirectory(prefix="afm-clf-") as tmp:
        train_file = Path(tmp) / "train.txt"
        with open(train_file, "w", encoding="utf-8") as fh:
            for label, text in train:
                fh.write(f"__label__{label} {text}\n")
        params = dict(
            input=str(train_file),
            epoch=int(epoch),
            lr=float(lr),
            wordNgrams=int(wordNgrams),
            dim=int(dim),
            minCount=int(min_count),
            bucket=int(bucket),
            loss="softmax",
            # fastText 0.9.2 fills its input matrix in blocks of (rows*dim)//10 values, one
            # block per training thread, on memory it does not zero: with fewer than 10
            # threads most rows start as whatever the allocator returned, and with exactly
            # 10 the last (rows*dim) % 10 values - the rarest word's row when n-grams are
            # off - still do. That is where its sporadic "Encountered NaN" comes from
            # (measured in a process whose heap earlier tests had used: thread=10 failed 3
            # of 24 runs, thread=11 0 of 80); an 11th thread's block covers the remainder.
            thread=FASTTEXT_INIT_BLOCKS,
            seed=int(seed),
            verbose=0,
        )
        model, params = _train_with_retries(
            fasttext, params, str(train_file), quantize, quantize_cutoff, verbose,
            check=train[:2000],
        )

        labels = set(model.get_labels())
        if labels != {f"__label__{label_pos}", f"__label__{label_neg}"}:
            raise ClassifierError(f"trained model has labels {sorted(labels)}; expected both classes")
        tmp_model = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        model.save_model(str(tmp_model))
        os.replace(tmp_model, out)

    clf = FastTextClassifier(out, label_pos=label_pos, label_neg=label_neg, punctuation=punctuation)
    test_texts = pos_test + neg_test
    if test_texts:
        scores = clf.score(test_texts, preprocessed=True)
        truth = np.array([1] * len(pos_test) + [0] * len(neg_test))
        metrics: dict[str, float] = binary_metrics(scores, truth, threshold)
    else:
        metrics = dict.fromkeys(("precision", "recall", "accuracy", "f1"), math.nan)
    report: dict[str, Any] = {
        **metrics,
        "threshold": threshold,
        "n_train": len(train),
        "n_test": len(test_texts),
        "n_test_pos": len(pos_test),
        "n_test_neg": len(neg_test),
        "label_pos": label_pos,
        "label_neg": label_neg,
        "model": str(out),
        "size_bytes": out.stat().st_size,
        "params": {k: v for k, v in params.items() if k not in ("input", "verbose")}
        | {"quantize": quantize, "quantize_cutoff": quantize_cutoff, "held_out": held_out},
        "punctuation": punctuation,
        "preprocess": "afm",
    }
    meta = {k: v for k, v in report.items() if k != "model"}
    metadata_path(out).write_text(json.dumps(meta, indent=2, sort_keys=True, default=float) + "\n")
    if verbose:
        print_summary(
            f"classifier {out.name}: held-out metrics (threshold {threshold})",
            {
                "train examples": len(train),
                "held-out examples": f"{len(pos_test)} {label_pos} / {len(neg_test)} {label_neg}",
                "precision": metrics["precision"],
                "recall": metrics["recall"],
                "accuracy": metrics["accuracy"],
                "F1": metrics["f1"],
                "model size (KB)": round(report["size_bytes"] / 1024, 1),
            },
        )
    return report


FASTTEXT_INIT_BLOCKS = 11
"""Training threads: ten initialisation blocks plus one for their remainder (see above)."""


def _learned_nothing(model: Any, check: list[tuple[str, str]]) -> bool:
    """True when the model does no better than always answering the majority class on
    (a sample of) its own training data, which a linear bag-of-n-grams model always beats
    unless its training silently broke."""
    if not check:
        return False
    labels, _ = model.predict([text for _, text in check], k=1)
    hits = sum(lab[0] == f"__label__{truth}" for (truth, _), lab in zip(check, labels))
    counts: dict[str, int] = {}
    for truth, _ in check:
        counts[truth] = counts.get(truth, 0) + 1
    return hits <= max(counts.values()) and len(counts) > 1


def _train_with_retries(
    fasttext: Any,
    params: dict[str, Any],
    train_file: str,
    quantize: bool,
    cutoff: int,
    verbose: bool,
    check: list[tuple[str, str]] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """``train_supervised`` (+ quantize) -> (model, parameters used).

    With every initialisation block set (``FASTTEXT_INIT_BLOCKS``) a NaN means a truly
    diverging run; it is still retried twice unchanged (training with several threads
    is not bit-reproducible), then with half and a quarter of the learning rate. Five
    failures are a :class:`ClassifierError`. A run that
    "succeeds" but fits its own training sample no better than the majority class
    (``check``; also seen with this build) is retried the same way, and kept (with a
    warning) only if every attempt ends like that."""
    attempt = dict(params)
    schedule = [1.0, 1.0, 1.0, 0.5, 0.25]
    for tries, scale in enumerate(schedule):
        attempt["lr"] = params["lr"] * scale
        try:
            model = fasttext.train_supervised(**attempt)
            if quantize:
                model.quantize(input=train_file, retrain=True, qnorm=True, cutoff=int(cutoff))
            if tries < len(schedule) - 1 and _learned_nothing(model, check or []):
                continue
            if _learned_nothing(model, check or []) and verbose:
                from afm.console import console

                console.print("[yellow]the classifier fits its training data no better than chance")
            return model, attempt
        except (RuntimeError, ValueError) as exc:
            msg = str(exc)
            if "NaN" in msg and tries < len(schedule) - 1:
                if verbose and schedule[tries + 1] != scale:
                    from afm.console import console

                    console.print(f"[yellow]fastText hit NaN; retrying with lr={attempt['lr'] * 0.5:g}")
                continue
            hint = ""
            if "NaN" in msg:
                hint = " (training diverged: lower --lr or give more / more varied examples)"
            elif "empty" in msg.lower():
                hint = " (no usable tokens: the inputs are empty after preprocessing)"
            raise ClassifierError(f"fastText training failed: {msg}{hint}") from exc
    raise AssertionError("unreachable")  # pragma: no cover


class FastTextClassifier:
    """A trained fastText classifier; ``score(texts)`` is P(positive label) per text.

    The model may have any labels (two or more): ``label_pos`` names the one whose
    probability is the score. It, and how text is prepared, come from the sidecar
    metadata written by :func:`train_classifier` when there is one; a model trained
    elsewhere has none, so its text is prepared ``raw`` (DCLM's way) and ``label_pos``
    must be given unless the model has a ``pos`` label.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        label_pos: str | None = None,
        label_neg: str | None = None,
        punctuation: bool | None = None,
        preprocess: str | None = None,
    ) -> None:
        # A gs:// / s3:// model is copied to this worker's disk once (fastText needs a file).
        if fs.is_remote(path) and not fs.isfile(str(path)):
            raise ClassifierError(f"classifier model not found: {path}")
        self.path = Path(fs.localize(str(path), companions=(".json",)))
        if not self.path.is_file():
            raise ClassifierError(f"classifier model not found: {self.path}")
        meta_file = metadata_path(self.path)
        self.metadata: dict[str, Any] = {}
        if meta_file.is_file():
            try:
                self.metadata = json.loads(meta_file.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ClassifierError(f"unreadable classifier metadata {meta_file}: {exc}") from exc
        fasttext = load_fasttext()
        try:
            self.model = fasttext.load_model(str(self.path))
        except ValueError as exc:
            raise ClassifierError(f"not a fastText model: {self.path} ({exc})") from exc
        self.label_pos = label_pos or self.metadata.get("label_pos", "pos")
        labels = [lab.removeprefix("__label__") for lab in self.model.get_labels()]
        if self.label_pos not in labels:
            raise ClassifierError(
                f"{self.path}: positive label {self.label_pos!r} not among the model's labels "
                f"{labels}; name the positive one (label_pos)"
            )
        others = [lab for lab in labels if lab != self.label_pos]
        self.label_neg = label_neg or self.metadata.get("label_neg") or (others[0] if others else "")
        self._pos_key = f"__label__{self.label_pos}"
        self.punctuation = bool(
            self.metadata.get("punctuation", True) if punctuation is None else punctuation
        )
        mode = preprocess or self.metadata.get("preprocess") or ("afm" if self.metadata else "raw")
        if mode not in PREPROCESS_MODES:
            raise ClassifierError(f"preprocess must be one of {PREPROCESS_MODES}, got {mode!r}")
        self.preprocess = mode
        self.labels = labels

    def prepare(self, text: str) -> str:
        """``text`` as this model's training text was prepared."""
        if self.preprocess == "raw":
            return preprocess_raw(text)
        return preprocess(text, punctuation=self.punctuation)

    def score(self, texts: Sequence[str] | Iterable[str], *, preprocessed: bool = False) -> np.ndarray:
        """Probability of the positive label for each text (float32 array, same order)."""
        lines = [t if preprocessed else self.prepare(t) for t in texts]
        if not lines:
            return np.zeros(0, dtype=np.float32)
        labels, probs = self.model.predict(lines, k=-1, threshold=0.0)
        out = np.zeros(len(lines), dtype=np.float32)
        for i, (labs, ps) in enumerate(zip(labels, probs)):
            for lab, p in zip(labs, ps):
                if lab == self._pos_key:
                    out[i] = min(float(p), 1.0)
                    break
        return out

    def score_one(self, text: str) -> float:
        return float(self.score([text])[0])


def read_labelled(
    paths: Iterable[str | os.PathLike[str]],
    *,
    text_field: str = "text",
    label_pos: str = "pos",
    label_neg: str = "neg",
    positive_from: float | None = None,
) -> tuple[list[str], list[str], int]:
    """(positives, negatives, skipped) from labelled JSONL / Parquet records (what
    ``afm quality annotate`` writes): the ``label`` field names the class, or, with
    ``positive_from``, the ``score`` field decides (``score >= positive_from``).
    Records with no text, no usable label or no score are skipped and counted."""

    pos: list[str] = []
    neg: list[str] = []
    skipped = 0
    for path in paths:
        p = str(path)
        if not os.path.isfile(p):
            raise ClassifierError(f"input not found: {p}")
        try:
            for rec in read_records(p):
                text = rec.get(text_field)
                if not isinstance(text, str) or not text.strip():
                    skipped += 1
                    continue
                if positive_from is not None:
                    score = rec.get("score")
                    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                        skipped += 1
                        continue
                    (pos if score >= positive_from else neg).append(text)
                    continue
                label = rec.get("label")
                if label == label_pos:
                    pos.append(text)
                elif label == label_neg:
                    neg.append(text)
                else:
                    skipped += 1
        except ValueError as exc:
            raise ClassifierError(str(exc)) from exc
    return pos, neg, skipped


def read_texts(paths: Iterable[str | os.PathLike[str]], text_field: str = "text") -> Iterator[str]:
    """Texts from JSONL(.gz)/JSON-lines, Parquet (column ``text_field``) or TXT (one
    document per line) files; records without the field raise a clear error."""

    for path in paths:
        p = str(path)
        if not os.path.isfile(p):
            raise ClassifierError(f"input not found: {p}")
        if p.endswith((".txt", ".txt.gz")):
            import gzip

            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rt", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.strip():
                        yield line.rstrip("\n")
            continue
        try:
            records = read_records(p)
            for n, rec in enumerate(records, 1):
                if text_field not in rec:
                    raise ClassifierError(
                        f"{p}: record {n} has no field {text_field!r} (fields: {sorted(rec)[:10]})"
                    )
                value = rec[text_field]
                if isinstance(value, str) and value.strip():
                    yield value
        except ValueError as exc:
            raise ClassifierError(str(exc)) from exc
