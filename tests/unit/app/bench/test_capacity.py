"""The capacity model's shuffle sizes are those of the records the pipeline builds."""

from __future__ import annotations

from afm.app.bench.pipelines.capacity import ShuffleBytes, capacity, measure_shuffle_bytes


def test_shuffle_bytes_follow_the_text_and_the_model_adds_up() -> None:
    words = "the river runs past the old mill and under a stone bridge to the sea".split()
    short = [" ".join(words[(i + j) % len(words)] for j in range(60)) + f" {i}" for i in range(20)]
    long = [(t + " ") * 20 for t in short]
    small, big = measure_shuffle_bytes(short), measure_shuffle_bytes(long)
    assert big.ids > small.ids and big.writer > small.writer
    # Sketches and band keys depend on the signature length, not on the text.
    assert abs(big.dedup_bands - small.dedup_bands) < 0.1 * small.dedup_bands
    shuffle = ShuffleBytes(ids=1000, dedup_documents=1000, dedup_sketch=500, dedup_bands=500,
                           writer=1000)
    out = capacity(1e9, 10.0, shuffle, documents_per_page=0.5)
    assert round(out["core_hours"]) == round(1e9 / 10 / 3600)
    assert out["shuffle_tb"] == (1e9 * 2000 + 0.5e9 * 2000) / 1e12
