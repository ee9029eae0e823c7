"""A word n-gram language model: modified Kneser-Ney estimation written as ARPA, and its
backoff scorer (CCNet's perplexity signal, Wenzek et al. 2020).

Text that is locally plausible but not language (a chain of word bigrams, a page's menus
and titles one after another) has a high perplexity under a word n-gram model of real
text: each step may be a seen bigram, but the trigrams across them are not ones good text
makes. CCNet scores every paragraph with a 5-gram KenLM model trained on Wikipedia and
keeps documents by perplexity; this module is that model at afm's scale:

* :func:`estimate` counts a corpus's n-grams and estimates an interpolated modified
  Kneser-Ney model (Chen & Goodman 1998, as KenLM's ``lmplz`` does: adjusted counts,
  three discounts per order from the count-of-counts, lower orders interpolated down to
  a uniform distribution over the vocabulary), optionally pruning the highest order's
  rare n-grams (their probability mass goes to the backoff weights, renormalised);
* :func:`write_arpa` / :func:`read_arpa` write and read the standard ARPA text format
  (log10 probabilities and backoffs), so the model can be queried by KenLM too (the slow
  tier checks that ``kenlm.Model`` scores sentences exactly as :class:`NGramLM` does);
* :class:`NGramLM` scores token sequences with the ARPA backoff rule, ``<s>`` before and
  ``</s>`` after each sentence, and gives a text's perplexity per token.

:func:`tokens` is the one normalisation the estimator and the scorer share: lower case,
digits to ``0``, words and punctuation marks as tokens, one sentence per line.
"""

from __future__ import annotations

import gzip
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from afm import fs

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
NO_PROB = -99.0  # log10 probability ARPA gives <s>: never predicted
_TOKEN = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*|\d+(?:[.,]\d+)*|[^\w\s]")
_DIGIT = re.compile(r"\d")


def tokens(line: str) -> list[str]:
    """One line's tokens: words (with inner apostrophes), numbers (digits read as 0) and
    punctuation marks, lower-cased."""
    return [_DIGIT.sub("0", t) for t in _TOKEN.findall(line.lower())]


def sentences(text: str) -> list[list[str]]:
    """A text's sentences as the model reads them: one per non-blank line."""
    out = []
    for line in text.splitlines():
        toks = tokens(line)
        if toks:
            out.append(toks)
    return out


# --------------------------------------------------------------------------- estimation


def _discounts(counts: Counter[tuple[str, ...]]) -> tuple[float, float, float]:
    """Modified Kneser-Ney's discounts D1, D2, D3+ for one order, from its count-of-counts
    (Chen & Goodman's estimates; clamped into (0, c) where a small corpus leaves a
    count-of-counts empty)."""
    t = Counter(c for c in counts.values() if c <= 4)
    t1, t2, t3, t4 = (t.get(i, 0) for i in (1, 2, 3, 4))
    y = t1 / (t1 + 2 * t2) if t1 + t2 else 0.5
    d1 = 1 - 2 * y * t2 / t1 if t1 else 0.5
    d2 = 2 - 3 * y * t3 / t2 if t2 else 1.0
    d3 = 3 - 4 * y * t4 / t3 if t3 else 1.5
    return tuple(min(max(d, 0.05), c - 0.05) for d, c in ((d1, 1), (d2, 2), (d3, 3)))  # type: ignore[return-value]


@dataclass
class Estimate:
    """A model as probabilities: ``logprob[n][ngram]`` (log10) and ``backoff[n][ngram]``
    (log10) for n = 1..order; what :func:`write_arpa` writes."""

    order: int
    logprob: list[dict[tuple[str, ...], float]]
    backoff: list[dict[tuple[str, ...], float]]
    discounts: list[tuple[float, float, float]] = field(default_factory=list)


def estimate(corpus: Iterable[Sequence[str]], order: int = 3, *, prune_count: int = 1) -> Estimate:
    """An interpolated modified Kneser-Ney model of ``corpus`` (sentences of tokens).

    The highest order counts n-grams; lower orders count the distinct words before an
    n-gram (continuation counts), except n-grams starting with ``<s>``, which nothing
    precedes. ``prune_count``: n-grams of the highest order seen this many times or fewer
    are left out of the model (1: singletons, as ``lmplz --prune 0 0 1``; 0: none), their
    probability reached through the backoff weights, renormalised so each context's
    distribution still sums to one."""
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    raw: Counter[tuple[str, ...]] = Counter()
    vocab: set[str] = set()
    for sent in corpus:
        words = [BOS, *sent, EOS]
        vocab.update(sent)
        for n in range(1, order + 1):
            for i in range(len(words) - n + 1):
                gram = tuple(words[i:i + n])
                if gram != (BOS,):
                    raw[gram] += 1
    if not vocab:
        raise ValueError("no tokens to estimate a model from")
    by_order: list[Counter[tuple[str, ...]]] = [Counter() for _ in range(order + 1)]
    for gram, c in raw.items():
        if len(gram) == order or gram[0] == BOS:
            by_order[len(gram)][gram] = c
    for gram in raw:  # continuation counts: distinct left extensions
        if len(gram) >= 2 and gram[1:] and gram[1] != BOS:
            lower = gram[1:]
            if len(lower) < order and lower[0] != BOS:
                by_order[len(lower)][lower] += 1
    vocab_size = len(vocab) + 2  # the words, </s> and <unk> (<s> is never predicted)

    logprob: list[dict[tuple[str, ...], float]] = [{} for _ in range(order + 1)]
    backoff: list[dict[tuple[str, ...], float]] = [{} for _ in range(order + 1)]
    prob: list[dict[tuple[str, ...], float]] = [{} for _ in range(order + 1)]
    gamma: list[dict[tuple[str, ...], float]] = [{} for _ in range(order + 1)]
    discounts = []
    for n in range(1, order + 1):
        counts = by_order[n]
        d = _discounts(counts)
        discounts.append(d)
        totals: defaultdict[tuple[str, ...], float] = defaultdict(float)
        kinds: defaultdict[tuple[str, ...], list[int]] = defaultdict(lambda: [0, 0, 0])
        for gram, c in counts.items():
            totals[gram[:-1]] += c
            kinds[gram[:-1]][min(c, 3) - 1] += 1
        for ctx, total in totals.items():
            k = kinds[ctx]
            gamma[n][ctx] = (d[0] * k[0] + d[1] * k[1] + d[2] * k[2]) / total
        for gram, c in counts.items():
            ctx = gram[:-1]
            lower = 1.0 / vocab_size if n == 1 else _p(prob, gamma, gram[1:], vocab_size)
            prob[n][gram] = (c - d[min(c, 3) - 1]) / totals[ctx] + gamma[n][ctx] * lower
        if n == 1:
            prob[1][(UNK,)] = gamma[1][()] / vocab_size
    for n in range(1, order + 1):
        for gram, p in prob[n].items():
            if n == order and order > 1 and raw[gram] <= prune_count:
                continue
            logprob[n][gram] = math.log10(p)
        if n == 1:
            logprob[1][(BOS,)] = NO_PROB
    for n in range(1, order):  # a context's backoff: what its extensions leave to the lower order
        pruned = n + 1 == order and prune_count > 0
        kept: defaultdict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
        if pruned:
            for gram in logprob[n + 1]:
                mass = kept[gram[:-1]]
                mass[0] += prob[n + 1][gram]
                mass[1] += _p(prob, gamma, gram[1:], vocab_size)
        for gram in logprob[n]:
            if gram not in gamma[n + 1]:
                continue  # never a context: backoff 0 (log10 1)
            if pruned:
                mass = kept.get(gram)
                if mass is None:
                    continue  # every extension pruned: the lower order is the distribution
                backoff[n][gram] = math.log10(max(1.0 - mass[0], 1e-12) / max(1.0 - mass[1], 1e-12))
            else:
                backoff[n][gram] = math.log10(gamma[n + 1][gram])
    return Estimate(order, logprob[1:], backoff[1:], discounts)


def _p(prob: list[dict[tuple[str, ...], float]], gamma: list[dict[tuple[str, ...], float]],
       gram: tuple[str, ...], vocab_size: int) -> float:
    """The interpolated probability of ``gram``'s last word after the rest (n-grams the
    corpus never held fall back through the contexts' gammas)."""
    n = len(gram)
    if gram in prob[n]:
        return prob[n][gram]
    lower = 1.0 / vocab_size if n == 1 else _p(prob, gamma, gram[1:], vocab_size)
    if n == 1:
        return prob[1].get((UNK,), lower)
    return gamma[n].get(gram[:-1], 1.0) * lower


# --------------------------------------------------------------------------- ARPA


def write_arpa(model: Estimate, path: str | Path) -> Path:
    """The model in ARPA format (gzip when the name ends in ``.gz``), n-grams sorted."""
    path = Path(path)
    lines = ["", "\\data\\"]
    lines += [f"ngram {n}={len(model.logprob[n - 1])}" for n in range(1, model.order + 1)]
    for n in range(1, model.order + 1):
        lines += ["", f"\\{n}-grams:"]
        backoffs = model.backoff[n - 1]
        for gram in sorted(model.logprob[n - 1]):
            entry = f"{model.logprob[n - 1][gram]:.7g}\t{' '.join(gram)}"
            if n < model.order and gram in backoffs:
                entry += f"\t{backoffs[gram]:.7g}"
            lines.append(entry)
    lines += ["", "\\end\\", ""]
    data = "\n".join(lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def read_arpa(path: str | Path) -> Estimate:
    """An ARPA file (plain or gzip; local or any filesystem :mod:`afm.fs` reaches) as log10
    probabilities and backoffs."""
    raw = fs.read_bytes(str(path))
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    order = 0
    logprob: list[dict[tuple[str, ...], float]] = []
    backoff: list[dict[tuple[str, ...], float]] = []
    current = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("ngram ") and "=" in line:
            order = max(order, int(line[6:].split("=")[0]))
            continue
        if line.startswith("\\"):
            if line.endswith("-grams:"):
                current = int(line[1:].split("-")[0])
                while len(logprob) < current:
                    logprob.append({})
                    backoff.append({})
            continue
        if not current:
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if "\t" in line:
            gram = tuple(parts[1].split())
            bo = parts[2] if len(parts) > 2 else None
        else:
            gram = tuple(parts[1:1 + current])
            bo = parts[1 + current] if len(parts) > 1 + current else None
        logprob[current - 1][gram] = float(parts[0])
        if bo is not None:
            backoff[current - 1][gram] = float(bo)
    if not order or len(logprob) != order:
        raise ValueError(f"{path}: not an ARPA language model")
    return Estimate(order, logprob, backoff)


# --------------------------------------------------------------------------- scoring


class NGramLM:
    """An ARPA model queried as KenLM queries it: the longest n-gram the model holds,
    plus the backoffs of the longer contexts it skipped; an unknown word scores as
    ``<unk>`` (no n-gram holds it, so the words after it back off past it)."""

    def __init__(self, model: Estimate) -> None:
        self.order = model.order
        self._lp: dict[tuple[str, ...], float] = {}
        self._bo: dict[tuple[str, ...], float] = {}
        for table in model.logprob:
            self._lp.update(table)
        for table in model.backoff:
            self._bo.update(table)
        if (UNK,) not in self._lp:
            raise ValueError("the model has no <unk> unigram")
        self._unk = self._lp[(UNK,)]

    @classmethod
    def load(cls, path: str | Path) -> NGramLM:
        return cls(read_arpa(path))

    def _word(self, context: tuple[str, ...], word: str) -> float:
        """log10 p(word | context), context the preceding words (at most order-1); an
        unknown word is ``<unk>``, reached through the backoffs of its contexts."""
        if (word,) not in self._lp:
            word = UNK
        bo = 0.0
        for start in range(len(context) + 1):
            gram = (*context[start:], word)
            lp = self._lp.get(gram)
            if lp is not None:
                return lp + bo
            bo += self._bo.get(context[start:], 0.0)
        return self._unk  # unreachable: the unigram is there

    def sentence_log10(self, words: Sequence[str]) -> float:
        """log10 probability of one sentence, ``<s>`` before it and ``</s>`` after (the
        sum KenLM's ``Model.score(sentence, bos=True, eos=True)`` gives)."""
        total = 0.0
        history: tuple[str, ...] = (BOS,)
        keep = self.order - 1
        for word in [*words, EOS]:
            total += self._word(history[-keep:] if keep else (), word)
            history = (*history, word)
        return total

    def log10_and_tokens(self, text: str) -> tuple[float, int]:
        """A text's log10 probability (each line a sentence) and its scored tokens (words
        and each line's ``</s>``)."""
        total, n = 0.0, 0
        for sent in sentences(text):
            total += self.sentence_log10(sent)
            n += len(sent) + 1
        return total, n

    def perplexity(self, text: str) -> float:
        """Perplexity per token (CCNet's measure): 10 ** (-log10 p / tokens); ``inf`` for
        a text without tokens."""
        total, n = self.log10_and_tokens(text)
        return 10.0 ** (-total / n) if n else math.inf
