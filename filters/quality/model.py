"""Model-based quality: a classifier's score per document, and LLM-guided selection.

Two parts:

* :class:`QualityClassifierFilter` scores every document with a quality model (a
  fastText file with any labels, or a Hugging Face classification / regression
  directory: :mod:`afm.filters.quality.scorers`) as ``quality_score`` and drops those
  under a threshold. The threshold is either fixed
  (``threshold``) or derived from the corpus: with ``top_fraction`` set, the pipeline
  first scores the whole corpus, computes the cut with
  :func:`score_threshold_for_top_fraction` (a global percentile, not a per-shard one) and
  then applies it with :class:`QualityScoreCut`, which reuses the stored scores.
* **LLM-guided selection** (the report cites it for step 4): an expensive scoring model
  labels a sample of documents, and the cheap fastText classifier is trained on those
  labels so the whole corpus can be scored at fastText speed. Any object with
  ``score(texts) -> list[float]`` is a :class:`DocumentScorer`: the project's own trained
  LM once it exists, a user's model behind a small adapter, or the small scorers here
  (:class:`NGramLMScorer`, a Kneser-Ney word trigram model fitted on reference text, i.e.
  perplexity-based selection in miniature; :class:`FastTextScorer`).

The default model ``data/quality/quality_default.ftz`` is a fastText classifier trained
on real, licensed web pages (``data/quality/README.md`` says what it is and is not).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from afm import fs
from afm.config import ConfigError
from afm.console import track
from afm.filters.base import Decision
from afm.filters.classifier import (
    PREPROCESS_MODES,
    FastTextClassifier,
    metadata_path,
    train_classifier,
)
from afm.filters.quality.ngram_lm import NGramLM, estimate, sentences
from afm.filters.quality.scorers import (
    KINDS,
    ScorerError,
    hf_head,
    model_kind,
    open_scorer,
    read_hf_config,
)
from afm.imports import resolve
from afm.sampling import reservoir_sample as sample_stream
from afm.schema import Document

DATA_DIR = Path(__file__).parent.parent / "data" / "quality"
DEFAULT_MODEL = DATA_DIR / "quality_default.ftz"


def resolve_model_path(model_path: str) -> str:
    """Where a worker finds ``model_path`` (``builtin``: the shipped classifier; local paths
    and URLs, read through :mod:`afm.fs` and copied to the worker's disk, as they are)."""
    return fs.shipped_or(model_path, DEFAULT_MODEL)


@dataclass
class QualityModelConfig:
    """Which quality model scores documents, and how its score selects them.

    ``model_path``: ``builtin`` (the model shipped with afm), a fastText file, or a
    Hugging Face model directory (local or a URL every worker reads); None switches the
    stage off (documents pass unscored). ``kind``: ``auto`` (a directory is Hugging Face,
    a file fastText), ``fasttext`` or ``hf``. ``label_pos``: the positive label (fastText:
    without ``__label__``; Hugging Face: a class name or index; None: the model's sidecar,
    or class 1 of two). ``threshold``: drop when the score is below it (None: the one a
    fastText model's sidecar records, else 0.5; a regression head must name its own,
    FineWeb-Edu's is 3).
    ``top_fraction``: instead of a threshold, keep this share of the corpus by a global
    percentile of the score. ``preprocess`` (fastText): ``afm`` or ``raw`` (None: the
    sidecar's, ``raw`` for a model trained elsewhere). ``batch_size``, ``max_length``
    (tokens), ``device`` (``auto``: the GPU when present) and ``dtype`` are for Hugging
    Face models; fastText documents are scored in batches of ``batch_size`` too."""

    model_path: str | None = fs.BUILTIN
    kind: str = "auto"
    label_pos: str | None = None
    threshold: float | None = None
    top_fraction: float | None = None
    preprocess: str | None = None
    batch_size: int = 64
    max_length: int = 512
    device: str = "auto"
    dtype: str = "auto"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"quality_model.kind must be one of {KINDS}, got {self.kind!r}")
        if self.top_fraction is not None and not 0 < self.top_fraction <= 1:
            raise ConfigError(f"quality_model.top_fraction must be in (0, 1], got {self.top_fraction}")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ConfigError(f"quality_model.threshold must be a finite number, got {self.threshold}")
        if self.preprocess is not None and self.preprocess not in PREPROCESS_MODES:
            raise ConfigError(f"quality_model.preprocess must be one of {PREPROCESS_MODES}, got {self.preprocess!r}")
        for name in ("batch_size", "max_length"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"quality_model.{name} must be >= 1, got {getattr(self, name)}")
        if not (self.device in ("auto", "cpu", "cuda", "mps") or self.device.startswith("cuda:")):
            raise ConfigError(f"quality_model.device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")


def score_threshold_for_top_fraction(scores: Sequence[float] | np.ndarray, fraction: float) -> float:
    """The score at which keeping ``score >= threshold`` keeps the top ``fraction`` of
    ``scores`` (ties at the cut may keep slightly more). ``fraction`` is in (0, 1]."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    arr = np.asarray(scores, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("no scores: cannot compute a top-fraction threshold of an empty corpus")
    if np.isnan(arr).any():
        raise ValueError("scores contain NaN")
    k = max(1, math.ceil(fraction * arr.size))
    return float(np.sort(arr)[::-1][k - 1])


def sidecar_threshold(path: str, default: float = 0.5) -> float:
    """The threshold a fastText model's sidecar recommends (``afm classifier train`` writes
    the one its metrics used; the shipped default's was chosen on held-out sites), else
    ``default``."""
    import json



    meta = str(metadata_path(path)) if not fs.is_remote(path) else f"{path}.json"
    if not fs.isfile(meta):
        return default
    try:
        value = json.loads(fs.read_bytes(meta).decode("utf-8")).get("threshold", default)
    except (OSError, ValueError):
        return default
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else default


class QualityClassifierFilter:
    """A quality model's score per document (``quality_score``); drop below the threshold.

    The model is a fastText file or a Hugging Face directory
    (:mod:`afm.filters.quality.scorers`). Everything checkable without loading it is
    checked here, at setup (the file or directory exists, a Hugging Face head and
    ``label_pos`` agree, a regression head has a threshold); the model itself is loaded
    lazily, once per worker, and never pickled. The curate stage scores documents in
    batches (:meth:`decide_batch`). With ``top_fraction`` set the filter only scores
    (the corpus-wide cut is applied afterwards by :class:`QualityScoreCut`).
    """

    name = "quality_model"

    def __init__(self, cfg: QualityModelConfig | None = None) -> None:
        self.cfg = cfg or QualityModelConfig()
        self.threshold = 0.5 if self.cfg.threshold is None else float(self.cfg.threshold)
        self.kind: str | None = None
        if self.cfg.model_path is not None:


            path = resolve_model_path(self.cfg.model_path)
            if not fs.exists(path):
                raise FileNotFoundError(f"quality model not found: {self.cfg.model_path}")
            self.kind = model_kind(path, self.cfg.kind)
            if self.kind == "hf":
                mode, _ = hf_head(read_hf_config(path), self.cfg.label_pos)
                if mode == "regression" and self.cfg.threshold is None and self.cfg.top_fraction is None:
                    raise ScorerError(
                        f"{self.cfg.model_path} is a regression head (its own score scale): set "
                        "quality_model.threshold (FineWeb-Edu's classifier keeps >= 3) or top_fraction")
            elif not fs.isfile(path):
                raise FileNotFoundError(f"quality model {self.cfg.model_path} is not a file (kind fasttext)")
            elif self.cfg.threshold is None:
                self.threshold = sidecar_threshold(path)
        self._scorer: Any = None

    # A fastText model at most this large is opened on the launcher to check its labels
    # (DCLM's is ~4 GB: that one is checked by the first worker that opens it).
    PREFLIGHT_MAX_BYTES = 1 << 30

    def preflight(self) -> None:
        """What can only be checked by opening the model, where that is cheap: a local
        fastText model has the positive label and the preparation named in config."""
        if self.kind != "fasttext" or self.cfg.model_path is None:
            return
        path = resolve_model_path(self.cfg.model_path)
        if os.path.isfile(path) and os.path.getsize(path) <= self.PREFLIGHT_MAX_BYTES:
            _ = self.scorer

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_scorer": None}

    @property
    def scorer(self) -> Any:
        """The opened model (:class:`~afm.filters.quality.scorers.QualityScorer`)."""
        if self._scorer is None:
            cfg = self.cfg
            self._scorer = open_scorer(
                resolve_model_path(cfg.model_path), kind=self.kind or "auto",  # type: ignore[arg-type]
                label_pos=cfg.label_pos, preprocess=cfg.preprocess, batch_size=cfg.batch_size,
                max_length=cfg.max_length, device=cfg.device, dtype=cfg.dtype)
        return self._scorer

    @property
    def classifier(self) -> Any:
        """The fastText classifier behind a fastText scorer (benchmarks time it directly)."""
        return self.scorer.clf

    def score_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Batch scoring (faster than one call per document)."""
        return np.asarray(self.scorer.score(list(texts)), dtype=np.float32)

    def decide(self, doc: Document, score: float) -> Decision:
        out = dict(doc)
        out["quality_score"] = score
        sig = {"quality_score": score}
        if not math.isfinite(score):
            return Decision(keep=False, reason="quality_model_no_score", signals={}, document=out,  # type: ignore[arg-type]
                            details={"score": str(score)})
        if self.cfg.top_fraction is None and score < self.threshold:
            return Decision(keep=False, reason="quality_model_score", signals=sig, document=out,  # type: ignore[arg-type]
                            details={"score": round(float(score), 4), "threshold": self.threshold,
                                     "model": self.cfg.model_path})
        return Decision(keep=True, signals=sig, document=out)  # type: ignore[arg-type]

    def decide_batch(self, docs: Sequence[Document]) -> list[Decision]:
        """One decision per document, the model called once for the whole batch."""
        if self.cfg.model_path is None:
            return [Decision(keep=True) for _ in docs]
        scores = self.score_texts([d.get("text") or "" for d in docs])
        return [self.decide(d, float(s)) for d, s in zip(docs, scores)]

    def __call__(self, doc: Document) -> Decision:
        return self.decide_batch([doc])[0]


class QualityScoreCut:
    """Second pass of a top-fraction selection: drop documents whose stored
    ``quality_score`` is under a corpus-wide threshold (no re-scoring)."""

    name = "quality_model"

    def __init__(self, threshold: float) -> None:
        self.threshold = float(threshold)

    def __call__(self, doc: Document) -> Decision:
        score = doc.get("quality_score")
        if score is None:
            return Decision.drop("quality_model_unscored")
        sig = {"quality_score": float(score)}
        if score < self.threshold:
            return Decision.drop("quality_model_top_fraction", sig, score=round(float(score), 4),
                                 threshold=self.threshold)
        return Decision(keep=True, signals=sig)


# --------------------------------------------------------------------------- scorers


@runtime_checkable
class DocumentScorer(Protocol):
    """Anything that scores texts, higher = better (an LLM, a reward model, ...)."""

    def score(self, texts: Sequence[str]) -> list[float]: ...


class FastTextScorer:
    """A trained fastText classifier as a :class:`DocumentScorer`."""

    def __init__(self, model_path: str | os.PathLike[str]) -> None:
        self.clf = FastTextClassifier(model_path)

    def score(self, texts: Sequence[str]) -> list[float]:
        return [float(x) for x in self.clf.score(list(texts))]


class CallableScorer:
    """Wrap ``fn(texts) -> scores`` (e.g. a call into a served LLM) as a scorer."""

    def __init__(self, fn: Callable[[Sequence[str]], Iterable[float]]) -> None:
        self.fn = fn

    def score(self, texts: Sequence[str]) -> list[float]:
        scores = [float(s) for s in self.fn(texts)]
        if len(scores) != len(texts):
            raise ValueError(f"scorer returned {len(scores)} scores for {len(texts)} texts")
        return scores


@dataclass
class NGramLMScorer:
    """A word n-gram language model (modified Kneser-Ney, :mod:`afm.filters.quality.ngram_lm`)
    fitted on reference text; ``score`` is the mean per-token log-probability, natural log
    (higher = closer to the reference). Perplexity against a clean reference is the
    classic LM-based quality signal (CCNet); this is its small instance, and the same
    interface takes a large trained LM."""

    order: int = 3
    model: NGramLM | None = None

    def fit(self, texts: Iterable[str]) -> NGramLMScorer:
        try:
            self.model = NGramLM(estimate((s for text in texts for s in sentences(text)), self.order,
                                          prune_count=0))
        except ValueError as exc:
            raise ValueError("NGramLMScorer.fit: no tokens in the reference texts") from exc
        return self

    def score(self, texts: Sequence[str]) -> list[float]:
        if self.model is None:
            raise ValueError("NGramLMScorer: call fit() with reference texts first")
        out = []
        for text in texts:
            log10, n = self.model.log10_and_tokens(text)
            out.append(log10 * math.log(10) / n if n else -math.inf)
        return out


def load_scorer(spec: str) -> DocumentScorer:
    """A scorer from ``module:attribute`` (a scorer object, or a zero-argument factory
    returning one) - how users plug their own model into ``afm quality label``."""

    obj = resolve(spec, what="scorer")
    if not isinstance(obj, DocumentScorer) and callable(obj):
        obj = obj()
    if not isinstance(obj, DocumentScorer):
        raise TypeError(f"{spec} is not a DocumentScorer (needs score(texts) -> list[float])")
    return obj


# --------------------------------------------------------------------------- labelling loop


@dataclass
class LabelledSample:
    positives: list[str]
    negatives: list[str]
    scores: list[float]  # the scorer's score of every sampled text, in sample order
    pos_threshold: float
    neg_threshold: float
    dropped: int  # sampled texts between the thresholds (too uncertain to label)


def label_with_scorer(
    texts: Sequence[str],
    scorer: DocumentScorer,
    *,
    pos_threshold: float | None = None,
    neg_threshold: float | None = None,
    pos_fraction: float = 0.3,
    neg_fraction: float = 0.3,
    batch_size: int = 64,
    progress: bool = False,
) -> LabelledSample:
    """Score ``texts`` with ``scorer`` in batches and label them: ``score >= pos_threshold``
    positive, ``score <= neg_threshold`` negative, the rest dropped as uncertain.
    Thresholds not given come from the sample itself: the top ``pos_fraction`` are
    positive and the bottom ``neg_fraction`` negative."""
    if not texts:
        raise ValueError("no texts to label")
    scores: list[float] = []
    starts: Iterable[int] = range(0, len(texts), batch_size)
    if progress:
        starts = track(starts, f"scoring ({batch_size}/batch)", unit="batches")
    for start in starts:
        batch = list(texts[start : start + batch_size])
        got = [float(s) for s in scorer.score(batch)]
        if len(got) != len(batch):
            raise ValueError(f"scorer returned {len(got)} scores for a batch of {len(batch)}")
        scores.extend(got)
    finite = [s for s in scores if math.isfinite(s)]
    if not finite:
        raise ValueError("the scorer gave no finite score")
    if pos_threshold is None:
        pos_threshold = score_threshold_for_top_fraction(finite, pos_fraction)
    if neg_threshold is None:
        neg_threshold = -score_threshold_for_top_fraction([-s for s in finite], neg_fraction)
    if neg_threshold >= pos_threshold:
        raise ValueError(
            f"negative threshold {neg_threshold:.4g} is not below positive threshold "
            f"{pos_threshold:.4g}: the scorer does not separate this sample"
        )
    pos = [t for t, s in zip(texts, scores) if s >= pos_threshold]
    neg = [t for t, s in zip(texts, scores) if s <= neg_threshold]
    return LabelledSample(pos, neg, scores, pos_threshold, neg_threshold,
                          dropped=len(texts) - len(pos) - len(neg))


def reservoir_sample(texts: Iterable[str], size: int, seed: int = 0) -> list[str]:
    """A uniform random sample of ``size`` non-blank texts in one pass, bounded memory."""
    if size <= 0:
        raise ValueError(f"sample size must be positive, got {size}")
    return sample_stream((t for t in texts if t and t.strip()), size, seed)[0]


def llm_guided_selection(
    texts: Iterable[str],
    scorer: DocumentScorer,
    out: str | os.PathLike[str],
    *,
    sample_size: int = 10_000,
    seed: int = 0,
    pos_threshold: float | None = None,
    neg_threshold: float | None = None,
    pos_fraction: float = 0.3,
    neg_fraction: float = 0.3,
    labels_out: str | os.PathLike[str] | None = None,
    progress: bool = False,
    **train_kwargs: Any,
) -> dict[str, Any]:
    """Label a random sample of ``texts`` with ``scorer`` and train the fast classifier
    on those labels (saved to ``out``). Returns the training report (held-out agreement
    of the fast classifier with the scorer's labels) plus the labelling counts.
    ``labels_out`` (JSONL) keeps every sampled text with its score and label."""
    import json


    sample = reservoir_sample(texts, sample_size, seed)
    labelled = label_with_scorer(
        sample, scorer, pos_threshold=pos_threshold, neg_threshold=neg_threshold,
        pos_fraction=pos_fraction, neg_fraction=neg_fraction, progress=progress,
    )
    if labels_out is not None:
        with open(labels_out, "w", encoding="utf-8") as fh:
            for text, score in zip(sample, labelled.scores):
                label = ("pos" if score >= labelled.pos_threshold
                         else "neg" if score <= labelled.neg_threshold else None)
                fh.write(json.dumps({"text": text, "score": score, "label": label}) + "\n")
    report = train_classifier(labelled.positives, labelled.negatives, out, seed=seed, **train_kwargs)
    report.update(
        sampled=len(sample),
        labelled_positive=len(labelled.positives),
        labelled_negative=len(labelled.negatives),
        unlabelled=labelled.dropped,
        pos_threshold=labelled.pos_threshold,
        neg_threshold=labelled.neg_threshold,
    )
    return report
