"""Labelled real pages for quality models (content vs boilerplate), AUC, site-level splits,
and the shipped default against the model it replaced on pages neither saw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from afm.filters.extraction.gold import GoldPage
from afm.filters.quality.eval import (
    auc,
    compare_models,
    content_and_boilerplate,
    labelled_texts,
    paired_auc_difference,
    split_by_domain,
)
from afm.filters.quality.model import (
    DATA_DIR,
    DEFAULT_MODEL,
    QualityClassifierFilter,
)

PAGE = b"""<html><head><title>t</title><script>var x = 1;</script></head><body>
<nav>Home | News | Sport | Weather | Sign in | Subscribe today for one pound a week</nav>
<article><p>The river carries sediment downstream and drops it where the current slows.</p>
<p>That is why deltas form at river mouths.</p></article>
<footer>Copyright 2026 The Example Times. All rights reserved. Privacy | Terms | Cookies</footer>
</body></html>"""


def test_content_and_boilerplate_of_a_page() -> None:
    truth = "The river carries sediment downstream and drops it where the current slows.\n\nThat is why deltas form at river mouths."
    content, rest = content_and_boilerplate(GoldPage("x", "1", "http://www.example.org/a", PAGE, truth=truth))
    assert content == truth
    assert "Sign in" in rest and "Copyright" in rest
    assert "sediment" not in rest and "var x" not in rest  # content and scripts are not boilerplate


def test_labelled_texts_and_splits() -> None:
    body = " ".join(["word"] * 60)
    pages = [GoldPage(f"wcxb-{kind}", str(i), f"http://site{i % 5}.test/p{i}",
                      f"<p>{body}</p><div>{' '.join(['menu'] * 60)}</div>".encode(), truth=body)
             for i, kind in enumerate(["article", "product", "forum", "article"] * 5)]
    items = labelled_texts(pages, positive_sets=("wcxb-article",), negative_content_sets=("wcxb-product",))
    content = [x for x in items if x.part == "content"]
    assert {x.set for x in content if x.label == 1} == {"wcxb-article"}
    assert {x.set for x in content if x.label == 0} == {"wcxb-product"}  # forum content: neither class
    assert sum(x.part == "boilerplate" for x in items) == 20 and all(x.label == 0 for x in items if x.part == "boilerplate")
    train, test = split_by_domain(items, 0.4, seed=1)
    assert train and test and not {x.domain for x in train} & {x.domain for x in test}


def test_auc_matches_sklearn_and_the_paired_bootstrap() -> None:
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(4, 60))
        s, y = rng.integers(0, 6, n).astype(float), np.r_[0, 1, rng.integers(0, 2, n - 2)]
        assert auc(s, y) == pytest.approx(sklearn.roc_auc_score(y, s))
    y = np.r_[np.ones(200), np.zeros(200)]
    good = y + rng.normal(0, 0.8, 400)
    bad = y + rng.normal(0, 2.0, 400)
    delta, se = paired_auc_difference(good, bad, y, n_boot=300)
    assert delta > 3 * se > 0
    rows = compare_models({"good": lambda t: good, "bad": lambda t: bad},
                          [type("X", (), {"text": "", "label": int(v)})() for v in y], set_name="toy")
    assert rows[0].delta_vs_first is None and rows[1].delta_vs_first == pytest.approx(delta)


def test_shipped_default_sidecar_records_its_held_out_figures() -> None:
    """What the default's sidecar records: good text of many kinds against junk made from
    it, the threshold chosen on held-out units, and per source, topic and junk kind what it
    keeps and rejects on sources it never read, with the verdict on being on by default."""
    meta = json.loads((DATA_DIR / "quality_default.ftz.json").read_text())
    assert meta["label_pos"] == "hq" and 0 < meta["threshold"] < 1 and meta["keep_target"] == 0.98
    held = meta["heldout"]
    assert held["chosen"]["threshold"] == meta["threshold"]
    good = held["test"]["good"]
    assert {"scrapinghub", "utomo-big5", "utomo-chaos", "manpages", "python-stdlib"} <= set(good)
    for g in good.values():
        assert 0 <= g["both_keep"] <= min(g["rules_keep"], g["model_keep"]) and g["by_topic"] and g["by_language"]
    junk = held["test"]["junk"]
    assert set(junk) >= {"word_salad", "keyword_spam", "templated", "cookie_legal", "all"}
    assert held["counts"]["hq"] == held["counts"]["cc"] > 1000  # as much junk as good text
    verdict = held["verdict"]
    assert verdict["catches_of_rules_pass"] == junk["all"]["model_catches_of_rules_pass"]
    assert verdict["on_by_default"] == (not verdict["why_not"])
    assert {s["use"] for s in meta["sources"]} >= {"held-out test only"}
    assert DEFAULT_MODEL.stat().st_size < 2 * 1024 * 1024


def test_default_figures_rerun_from_the_shared_data(shared_eval: Path) -> None:
    """The ScrapingHub row of the sidecar, re-run: the same share of the set's main texts
    kept by the shipped model at its threshold."""
    from afm.filters.extraction.gold import load_scrapinghub
    from afm.filters.quality.texts import gold_texts

    texts = gold_texts(load_scrapinghub(shared_eval))
    flt = QualityClassifierFilter()
    kept = float(np.mean(flt.score_texts([t.text for t in texts]) >= flt.threshold))
    recorded = json.loads((DATA_DIR / "quality_default.ftz.json").read_text())["heldout"]["test"]["good"]["scrapinghub"]
    assert len(texts) == recorded["n"] and kept == pytest.approx(recorded["model_keep"], abs=0.006)
