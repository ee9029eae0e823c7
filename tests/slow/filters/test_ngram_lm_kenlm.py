"""Parity: KenLM (the field's n-gram query library) scores afm's ARPA models exactly as
:class:`afm.filters.quality.ngram_lm.NGramLM` does, sentence by sentence, unknown words included,
for models of every order from 2 (KenLM reads no unigram model), pruned or not, of random
and of real text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from afm.filters.quality.ngram_lm import NGramLM, estimate, sentences, write_arpa
from tests.unit.filters.test_ngram_lm import KENLM_EXPECTED

pytestmark = pytest.mark.slow
kenlm = pytest.importorskip("kenlm", reason="the parity test needs kenlm (pip install 'afm[reference]')")

WORDS = "the cat dog sat on a mat ran to house big small".split()


def _corpus(seed: int = 0, n: int = 200) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(1, 8))] for _ in range(n)]


def _check(arpa, probes: list[list[str]]) -> None:
    mine, theirs = NGramLM.load(arpa), kenlm.Model(str(arpa))
    for words in probes:
        assert mine.sentence_log10(words) == pytest.approx(theirs.score(" ".join(words), bos=True, eos=True),
                                                           abs=1e-4), words


@pytest.mark.parametrize(("order", "prune"), [(2, 0), (3, 0), (3, 1), (4, 1), (5, 1)])
def test_kenlm_scores_equal_ours(tmp_path, order, prune):
    arpa = write_arpa(estimate(_corpus(), order, prune_count=prune), tmp_path / "m.arpa")
    probes = _corpus(seed=1, n=100) + [["zebra"], [], ["the", "zebra", "sat", "on", "a", "quantum", "mat"]]
    _check(arpa, probes)


def test_the_stored_expected_values_are_kenlms(tmp_path):
    model = kenlm.Model(str(write_arpa(estimate(_corpus(), 3, prune_count=1), tmp_path / "m.arpa")))
    for sentence, expected in KENLM_EXPECTED.items():
        assert model.score(sentence, bos=True, eos=True) == pytest.approx(expected, abs=1e-6)


def test_a_model_of_real_text(tmp_path):
    """A model of the project's own documentation (real English, code and all), probed
    with sentences it never read and unknown words."""
    docs = sorted((Path(__file__).parents[3] / "docs").glob("*.md"))
    corpus = [s for path in docs[: len(docs) // 2] for s in sentences(path.read_text(encoding="utf-8"))]
    probes = [s for path in docs[len(docs) // 2:] for s in sentences(path.read_text(encoding="utf-8"))][:500]
    assert len(corpus) > 500 and len(probes) == 500
    for order in (3, 4):
        _check(write_arpa(estimate(corpus, order, prune_count=1), tmp_path / f"docs{order}.arpa"), probes)
