"""Quality scorers from files: the classifiers users of the field already trust.

Two formats, one interface (``score(texts) -> float array``, higher = better):

* **fastText** (``.bin`` / ``.ftz``): any labels; the score is the probability of the
  positive label named in config (DCLM's classifier says ``__label__hq`` against
  ``__label__cc``: ``label_pos: hq``). A model trained by ``afm classifier train`` names
  its labels and text preparation in its sidecar ``MODEL.json``; one trained elsewhere
  gets its text as DCLM and datatrove feed it (lines joined, nothing else changed).
* **Hugging Face** sequence-classification or regression directories (``config.json`` +
  weights + tokenizer files), through the ``hf`` extra (torch and transformers, imported
  only when such a model is opened). A regression head (one output, FineWeb-Edu's
  classifier: an embedding model scoring 0-5, kept at >= 3) gives its value; a
  classification head gives the probability of ``label_pos`` (a label name of the
  model's ``id2label`` or an index; two classes and none named: class 1). Texts are
  scored in batches, longest first so each batch pads little, on the GPU when one is
  present (``device: auto``). Only local files are read (``local_files_only``): nothing
  is downloaded at run time.

The filter that applies a scorer (threshold or corpus percentile) is
:class:`afm.filters.quality.model.QualityClassifierFilter`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from afm import fs
from afm.filters.classifier import ClassifierError, FastTextClassifier

KINDS = ("auto", "fasttext", "hf")


class ScorerError(ValueError):
    """A quality model cannot be opened or does not fit its config."""


class QualityScorer(Protocol):
    """Texts in, one score per text out (higher = better)."""

    kind: str

    def score(self, texts: Sequence[str]) -> np.ndarray: ...


def model_kind(path: str, kind: str = "auto") -> str:
    """``fasttext`` or ``hf``: as configured, else a directory is a Hugging Face model
    and a file is fastText."""
    if kind not in KINDS:
        raise ScorerError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind != "auto":
        return kind

    return "hf" if fs.isdir(path) else "fasttext"


def read_hf_config(path: str) -> dict[str, Any]:
    """A Hugging Face model directory's ``config.json`` (no torch needed)."""

    cfg_path = fs.join(path, "config.json")
    if not fs.isfile(cfg_path):
        raise ScorerError(f"{path}: not a Hugging Face model directory (no config.json)")
    try:
        return json.loads(fs.read_bytes(cfg_path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScorerError(f"{cfg_path}: unreadable ({exc})") from exc


def hf_head(config: dict[str, Any], label_pos: str | None) -> tuple[str, int | None]:
    """What a Hugging Face head's output means: ``("regression", None)`` (its one value
    is the score), or ``("probability", i)`` (softmax / sigmoid probability of class
    ``i``). Raises :class:`ScorerError` when ``label_pos`` names no class."""
    id2label = {int(k): str(v) for k, v in (config.get("id2label") or {}).items()}
    num_labels = int(config.get("num_labels") or len(id2label) or 2)
    if config.get("problem_type") == "regression" or num_labels == 1:
        if label_pos is not None:
            raise ScorerError("label_pos is for classification heads; this model is a regression head")
        return "regression", None
    if label_pos is None:
        if num_labels == 2:
            return "probability", 1
        raise ScorerError(
            f"the model has {num_labels} classes {sorted(id2label.values())}: name the positive one (label_pos)")
    by_name = {v: k for k, v in id2label.items()}
    if label_pos in by_name:
        return "probability", by_name[label_pos]
    if label_pos.isdigit() and int(label_pos) < num_labels:
        return "probability", int(label_pos)
    raise ScorerError(f"label_pos {label_pos!r} is not one of the model's classes {sorted(by_name)}")


class FastTextQualityScorer:
    """A fastText model file; the score is P(``label_pos``)."""

    kind = "fasttext"

    def __init__(self, path: str, *, label_pos: str | None = None, preprocess: str | None = None) -> None:
        try:
            self.clf = FastTextClassifier(path, label_pos=label_pos, preprocess=preprocess)
        except ClassifierError as exc:
            raise ScorerError(str(exc)) from exc
        self.label_pos = self.clf.label_pos

    def score(self, texts: Sequence[str]) -> np.ndarray:
        return self.clf.score(list(texts)).astype(np.float32)


def pick_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; anything else as given."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ScorerError(f"device {device!r}: torch sees no GPU here")
    return device


def position_limit(config: Any, tokenizer: Any) -> int:
    """The most tokens the model can read: its tokenizer's limit and its position table
    (RoBERTa-style models spend two positions on the padding offset)."""
    limits = [n for n in (getattr(tokenizer, "model_max_length", None),) if isinstance(n, int) and n < 1_000_000]
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        limits.append(positions - 2 if "roberta" in str(getattr(config, "model_type", "")) else positions)
    return min(limits) if limits else 1_000_000


class HFQualityScorer:
    """A Hugging Face sequence-classification / regression model directory, batched."""

    kind = "hf"

    def __init__(self, path: str, *, label_pos: str | None = None, batch_size: int = 32,
                 max_length: int = 512, device: str = "auto", dtype: str = "auto") -> None:
        self.path = fs.localize(path) if fs.is_remote(path) else path
        self.mode, self.index = hf_head(read_hf_config(self.path), label_pos)
        self.label_pos = label_pos
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:
            raise ScorerError(
                "a Hugging Face quality model needs torch and transformers: pip install 'afm[hf]'") from exc
        self.torch = torch
        self.device = pick_device(device)
        dtypes = {"auto": torch.bfloat16 if self.device.startswith("cuda") else torch.float32,
                  "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        if dtype not in dtypes:
            raise ScorerError(f"dtype must be one of {sorted(dtypes)}, got {dtype!r}")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
            self.model = AutoModelForSequenceClassification.from_pretrained(
                self.path, local_files_only=True, dtype=dtypes[dtype])
        except (OSError, ValueError) as exc:
            raise ScorerError(f"{path}: cannot load the model or its tokenizer ({exc})") from exc
        self.model.to(self.device).eval()
        self.max_length = min(self.max_length, position_limit(self.model.config, self.tokenizer))
        self.multi_label = getattr(self.model.config, "problem_type", None) == "multi_label_classification"

    def _batch(self, texts: list[str]) -> np.ndarray:
        torch = self.torch
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with torch.inference_mode():
            logits = self.model(**enc).logits.float()
        if self.mode == "regression":
            out = logits[:, 0]
        elif self.multi_label:
            out = torch.sigmoid(logits[:, self.index])
        else:
            out = torch.softmax(logits, dim=-1)[:, self.index]
        return out.cpu().numpy().astype(np.float32)

    def score(self, texts: Sequence[str]) -> np.ndarray:
        """Scores in the order given; batches are formed longest first (less padding)."""
        texts = [t or "" for t in texts]
        out = np.zeros(len(texts), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start: start + self.batch_size]
            out[idx] = self._batch([texts[i] for i in idx])
        return out


def open_scorer(path: str, *, kind: str = "auto", label_pos: str | None = None,
                preprocess: str | None = None, batch_size: int = 32, max_length: int = 512,
                device: str = "auto", dtype: str = "auto") -> QualityScorer:
    """The scorer for the model at ``path`` (see the module docstring)."""
    resolved = model_kind(path, kind)
    if resolved == "hf":
        if preprocess is not None:
            raise ScorerError("preprocess applies to fastText models; a Hugging Face model has its tokenizer")
        return HFQualityScorer(path, label_pos=label_pos, batch_size=batch_size, max_length=max_length,
                               device=device, dtype=dtype)
    return FastTextQualityScorer(path, label_pos=label_pos, preprocess=preprocess)


def describe_model(path: str | os.PathLike[str]) -> str:
    """One line about a model file or directory, for summaries."""
    p = Path(path)
    if p.is_dir():
        try:
            cfg = read_hf_config(str(p))
        except ScorerError:
            return f"{p} (directory)"
        archs = ",".join(cfg.get("architectures") or []) or cfg.get("model_type", "?")
        return f"{p} (Hugging Face {archs}, {cfg.get('num_labels', len(cfg.get('id2label') or {}) or 2)} output(s))"
    return f"{p} (fastText)"


__all__ = ["KINDS", "FastTextQualityScorer", "HFQualityScorer", "QualityScorer", "ScorerError",
           "describe_model", "hf_head", "model_kind", "open_scorer", "pick_device", "position_limit",
           "read_hf_config"]
