"""A text's gain from context under a small word model: the quality rule for word chains.

Spun and machine-made text is often a *chain*: each word drawn given the word before it
(a bigram or Markov generator fed with real pages). Every pair of neighbours is common
English, so the published rules, a word n-gram model's perplexity and a bag-of-words
classifier all pass it; what it lacks is anything beyond the last word. A language model
that reads a text twice, once with each word seeing only itself and once with up to 63
words before it, says so: real writing's loss falls by ~0.3-0.6 nats a word with the
context (its sentences are about something), a chain's by ~0.1 (only the bigram it was
drawn from helps). :meth:`ContextGainModel.gain` is that fall, nats a word, and the rule
``afm_context_gain`` rejects a text below ``quality.min_context_gain``
(``experiments/chain-detectors`` and docs/quality.md hold the measurements).

**The model** is the AFM transformer shrunk to two layers of width 96 over a vocabulary
of 4,096 lower-cased words (:func:`words`; rarer words, numbers and punctuation become
three shared tokens), trained by the one trainer (task ``context_gain``, stage
``context-gain``: :mod:`afm.training.tasks.context_gain`) on the main texts of WCXB's
development sites and this machine's documentation, at the whole 64-word window and at
spans of 3 and 1 words, so one model gives both losses. ``afm quality
train-context-gain`` makes it and writes it here as numpy arrays (``.npz``: the vocabulary,
the shape, every weight), so a curation worker needs numpy only: this module's forward
pass is the transformer's (RMSNorm, q/k norms, rotate-half RoPE, SwiGLU, the tied readout
at ``1/width``), checked against :mod:`afm.model`'s own scoring in the slow tier
(``tests/slow/filters/test_context_gain_parity.py``) and against stored values in ``make test``.

**The cost** is one forward pass over at most :data:`MAX_WINDOWS` windows of 64 words:
with one word of context attention returns that word's own value, so the model's answer
depends on the word alone and is a table built once (:meth:`ContextGainModel.alone`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from afm import fs

DATA_DIR = Path(__file__).parent.parent / "data" / "quality"
DEFAULT_MODEL = DATA_DIR / "context_gain.npz"

TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|[^\w\s]")
SPECIALS = ("<pad>", "<unk>", "</s>", "<num>", "<punct>")  # ids 0-4; </s> is the trainer's EOS (2)
PAD, UNK, EOS, NUM, PUNCT = range(len(SPECIALS))
VOCABULARY_SIZE = 4096
WINDOW = 64  # words a scored word may see (the training row)
FIRST_SCORED = 4  # each window's first words are read, not scored (too little context to gain from)
MAX_WINDOWS = 8  # windows of a text scored: its first 8 x 64 + 1 tokens (4 caught 80% of development chains at a 1% cost, 8 caught 90%)


def words(text: str) -> list[str]:
    """The model's tokens: words (with inner apostrophes) and single punctuation marks,
    lower-cased."""
    return [t.lower() for t in TOKEN.findall(text)]


def build_vocabulary(texts: Iterable[str], size: int = VOCABULARY_SIZE) -> list[str]:
    """The specials, then the ``size - 5`` commonest words of ``texts``."""
    counts = Counter(w for text in texts for w in words(text))
    common = [w for w, _ in counts.most_common(size) if w not in SPECIALS][: size - len(SPECIALS)]
    return [*SPECIALS, *common]


def shared_id(word: str) -> int:
    """The token of a word outside the vocabulary: a number, punctuation, or unknown."""
    if word.isdigit():
        return NUM
    return UNK if word[0].isalnum() else PUNCT


def encode(text: str, index: dict[str, int]) -> np.ndarray:
    """``text``'s token ids under a vocabulary's ``{word: id}``."""
    return np.array([index[w] if w in index else shared_id(w) for w in words(text)], dtype=np.int32)


@dataclass(frozen=True)
class Shape:
    """The transformer's sizes, as the model file stores them."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    norm_eps: float
    rope_base: float

    @property
    def logit_scale(self) -> float:
        return 1.0 / self.dim  # the muParam readout of afm.model.config


def _rms_norm(x: np.ndarray, scale: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * scale


@lru_cache(maxsize=8)
def _rope_tables(t: int, head_dim: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [T, H] of rotate-half RoPE at positions 0..t-1 (made once per shape and
    shared: callers only read them)."""
    inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)
    angles = np.arange(t, dtype=np.float32)[:, None] * inv
    angles = np.concatenate([angles, angles], axis=-1)
    cos, sin = np.cos(angles), np.sin(angles)
    cos.setflags(write=False)
    sin.setflags(write=False)
    return cos, sin


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate ``x`` [B, N, T, H] by the tables [T, H] (rotate-half pairing)."""
    h = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin


def _log_normaliser(logits: np.ndarray) -> np.ndarray:
    """``logsumexp`` over the last axis (``logits`` is overwritten)."""
    top = logits.max(axis=-1, keepdims=True)
    logits -= top
    np.exp(logits, out=logits)
    return top[..., 0] + np.log(logits.sum(axis=-1))


def _log_softmax_at(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``log softmax(logits)[target]`` per row (``logits`` is overwritten)."""
    picked = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return picked - _log_normaliser(logits)


class ContextGainModel:
    """The word model of a ``.npz`` file from ``afm quality train-context-gain``."""

    def __init__(self, path: str | Path) -> None:
        local = fs.localize(resolve_model_path(str(path)))  # a gs:// model is copied to this worker once
        try:
            with np.load(local, allow_pickle=False) as z:
                self.vocabulary = [str(w) for w in z["vocabulary"]]
                self.shape = Shape(**json.loads(str(z["shape"])))
                self.params = {k: z[k].astype(np.float32) for k in z.files if k not in ("vocabulary", "shape")}
            self.index = {w: i for i, w in enumerate(self.vocabulary)}
            self._layers = [self._layer(n) for n in range(self.shape.n_layers)]
            if self.params["embed"].shape != (len(self.vocabulary), self.shape.dim):
                raise ValueError("its embedding does not match its vocabulary and shape")
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise ValueError(f"{path}: not a context-gain model ({exc}); afm quality train-context-gain "
                             "makes one") from None
        self._alone: tuple[np.ndarray, np.ndarray] | None = None

    # -- the transformer's forward pass ------------------------------------------------
    def _layer(self, n: int) -> dict[str, np.ndarray]:
        """Layer ``n``'s weights as 2-D matrices (one BLAS product per projection)."""
        p, s = self.params, self.shape
        pre = f"layers/{n}/"
        return {"attn_norm": p[pre + "attn_norm/scale"], "mlp_norm": p[pre + "mlp_norm/scale"],
                "q_norm": p[pre + "attn/q_norm/scale"], "k_norm": p[pre + "attn/k_norm/scale"],
                "wq": p[pre + "attn/wq"].reshape(s.dim, -1), "wk": p[pre + "attn/wk"].reshape(s.dim, -1),
                "wv": p[pre + "attn/wv"].reshape(s.dim, -1), "wo": p[pre + "attn/wo"].reshape(-1, s.dim),
                "w_gate": p[pre + "mlp/w_gate"], "w_up": p[pre + "mlp/w_up"], "w_down": p[pre + "mlp/w_down"]}

    def features(self, ids: np.ndarray, window: int) -> np.ndarray:
        """Final-norm hidden states [B, T, dim] of token rows ``ids`` [B, T], each token
        seeing at most ``window`` tokens (itself included)."""
        s = self.shape
        b, t = ids.shape
        x = self.params["embed"][ids]
        i = np.arange(t)
        seen = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
        bias = np.where(seen, 0.0, -np.inf).astype(np.float32)  # [T, T], added to every head's scores
        cos, sin = _rope_tables(t, s.head_dim, s.rope_base)
        group = s.n_heads // s.n_kv_heads

        def heads(a: np.ndarray, n: int) -> np.ndarray:  # [B, T, n*H] -> [B, n, T, H]
            return a.reshape(b, t, n, s.head_dim).transpose(0, 2, 1, 3)

        for w in self._layers:
            h = _rms_norm(x, w["attn_norm"], s.norm_eps)
            q = _rope(_rms_norm(heads(h @ w["wq"], s.n_heads), w["q_norm"], s.norm_eps), cos, sin)
            k = _rope(_rms_norm(heads(h @ w["wk"], s.n_kv_heads), w["k_norm"], s.norm_eps), cos, sin)
            v = heads(h @ w["wv"], s.n_kv_heads)
            if group > 1:
                k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
            scores = (q @ k.transpose(0, 1, 3, 2)) * s.head_dim ** -0.5 + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            x = x + (scores @ v).transpose(0, 2, 1, 3).reshape(b, t, -1) @ w["wo"]
            h = _rms_norm(x, w["mlp_norm"], s.norm_eps)
            gate = h @ w["w_gate"]
            x = x + (gate / (1.0 + np.exp(-gate)) * (h @ w["w_up"])) @ w["w_down"]
        return _rms_norm(x, self.params["final_norm/scale"], s.norm_eps)

    def token_logprobs(self, ids: np.ndarray, window: int) -> np.ndarray:
        """``log p(ids[:, t+1] | what ids[:, t] sees)`` [B, T-1] at attention span ``window``."""
        hidden = self.features(ids[:, :-1], window)
        return _log_softmax_at(hidden @ self.params["embed"].T * self.shape.logit_scale, ids[:, 1:])

    def alone(self) -> tuple[np.ndarray, np.ndarray]:
        """Every word's hidden state when it sees only itself [V, dim] and that readout's
        log-normaliser [V]: a span of one makes attention return the word's own value,
        whatever its position, so these two tables are the model at span 1."""
        if self._alone is None:
            vocab = np.arange(len(self.vocabulary))[:, None]
            hidden = self.features(vocab, 1)[:, 0]
            self._alone = hidden, _log_normaliser(hidden @ self.params["embed"].T * self.shape.logit_scale)
        return self._alone

    # -- the signal ----------------------------------------------------------------------
    def gain(self, text: str) -> tuple[float, int]:
        """(nats a word the 64-word window saves over seeing the word alone, words scored):
        over the text's first :data:`MAX_WINDOWS` whole windows, each window's first
        :data:`FIRST_SCORED` words read but not scored, unknown words not scored. (0.0, 0)
        for a text of fewer than 65 tokens (words and punctuation marks): not judged."""
        ids = encode(text, self.index)
        n = min((len(ids) - 1) // WINDOW, MAX_WINDOWS)
        if n == 0:
            return 0.0, 0
        rows = np.stack([ids[w * WINDOW: w * WINDOW + WINDOW + 1] for w in range(n)])
        inputs, targets = rows[:, :-1], rows[:, 1:]
        whole = self.token_logprobs(rows, WINDOW)
        hidden, normaliser = self.alone()
        one = np.einsum("btd,btd->bt", hidden[inputs], self.params["embed"][targets]) * self.shape.logit_scale
        one = one - normaliser[inputs]
        scored = (targets != UNK) & (np.arange(WINDOW)[None, :] >= FIRST_SCORED)
        count = int(scored.sum())
        return (float((whole - one)[scored].mean()), count) if count else (0.0, 0)


def resolve_model_path(path: str) -> str:
    """``builtin``: the word model shipped inside this process's installation of afm."""
    return fs.shipped_or(path, DEFAULT_MODEL)


@lru_cache(maxsize=4)
def load_context_gain_model(path: str) -> ContextGainModel:
    """The model at ``path`` (``builtin``: the shipped one), read once per process."""
    return ContextGainModel(path)


def model_arrays(params: dict[str, np.ndarray], shape: Shape, vocabulary: Sequence[str]) -> dict[str, np.ndarray]:
    """What a model file holds: a run's model weights (flat ``path: array``), its shape
    and its vocabulary, as the arrays of one ``.npz``."""
    shape_json = json.dumps(shape.__dict__, sort_keys=True)
    return {"vocabulary": np.array(list(vocabulary)), "shape": np.array(shape_json),
            **{k: np.asarray(v, np.float32) for k, v in params.items()}}
