"""A chain of document filters over labelled texts, and the check that the default stages
keep real articles and drop junk (20 of each)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.filters.base import Decision
from afm.filters.quality.audit import Outcome, group, run_chain, topic_gaps
from afm.filters.quality.model import DATA_DIR


class _DropShort:
    name = "short"

    def __call__(self, doc):
        return Decision(True) if len(doc["text"].split()) > 2 else Decision.drop("too_short")


class _DropX:
    name = "nox"

    def decide_batch(self, docs):
        return [Decision.drop("has_x") if "x" in d["text"] else Decision(True) for d in docs]

    def __call__(self, doc):
        return self.decide_batch([doc])[0]


def test_first_drop_decides_and_groups_count():
    out = run_chain([_DropShort(), _DropX()], ["a b", "a b c", "x y z", "x y"], batch_size=2)
    assert out == [Outcome(False, "short", "too_short"), Outcome(True), Outcome(False, "nox", "has_x"),
                   Outcome(False, "short", "too_short")]
    groups = group(["s1", "s1", "s2", "s2"], out)
    assert groups["s1"].keep_rate == 0.5 and groups["s2"].dropped_by["short:too_short"] == 1
    assert topic_gaps(group(["t"] * 10 + ["other"] * 10, [Outcome(True)] * 20), 1.0) == {"t": 0.0}


def test_default_stages_keep_real_articles_and_drop_junk(shared_eval: Path):
    """The earlier 20-article check: the default document stages of afm curate (language,
    safety, PII, quality rules; the quality model is off by default) keep at least 18 of
    20 real articles (the first 20 English ScrapingHub article bodies of 200 words or
    more, by id) and drop at least 18 of 20 junk texts (every tenth of the hand-written
    negatives: keyword stuffing, ads, navigation, cookie walls, tag clouds, comment spam,
    shop listings)."""
    pytest.importorskip("fasttext")
    from afm.filters.language import LanguageFilter
    from afm.pipelines.curate.stages import document_filters

    truth = json.loads((shared_eval / "extraction" / "ground-truth.json").read_text(encoding="utf-8"))
    bodies = [truth[k].get("articleBody") or "" for k in sorted(truth)]
    lid = LanguageFilter()
    long = [b for b in bodies if len(b.split()) >= 200]
    english = [b for b, (lang, _) in zip(long, lid.predict(long)) if lang == "en"][:20]
    negatives = [json.loads(line)["text"] for line in
                 (DATA_DIR / "handwritten" / "train_negatives.jsonl").read_text().splitlines() if line.strip()]
    junk = negatives[::10][:20]
    assert len(english) == 20 and len(junk) == 20
    filters = document_filters()
    kept = sum(o.kept for o in run_chain(filters, english))
    dropped = sum(not o.kept for o in run_chain(filters, junk))
    assert kept >= 18, f"kept {kept} of 20 real articles"
    assert dropped >= 18, f"dropped {dropped} of 20 junk texts"
