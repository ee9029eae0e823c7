"""How the word model of the perplexity rule is trained and its threshold chosen
(filters/quality/lm.py), on small texts."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from afm.app.commands.filters.quality import quality
from afm.filters.quality.audit import write_sidecar
from afm.filters.quality.lm import (
    choose_threshold,
    development_report,
    perplexities,
    split_sites,
    train_word_lm,
)
from afm.filters.quality.texts import KindText

TEXT = ("The council met on Tuesday to discuss the budget for the public schools of the city.\n"
        "Members said the plan would add teachers next year, paid for by a tax approved in spring.\n"
        "Parents asked for smaller classes, and the vote is expected next month.\n")


def _texts(n: int = 40) -> list[KindText]:
    return [KindText(text=TEXT, source="wcxb", kind="article", unit=f"site{i}.example", id=f"t{i}") for i in range(n)]


def test_sites_are_split_whole():
    train, held = split_sites(_texts())
    assert train and held and len(train) + len(held) == 40
    assert not {t.unit for t in train} & {t.unit for t in held}


def test_threshold_keeps_the_target_share():
    assert choose_threshold([float(x) for x in range(1, 101)], keep=0.99) == 100.0
    assert choose_threshold([10.2] * 10, keep=0.99) == 11.0


def test_train_writes_a_model_the_rule_reads(tmp_path):
    info = train_word_lm(_texts(), tmp_path / "lm.arpa.gz")
    assert info["order"] == 3 and info["ngrams"][0] > 30 and info["bytes"] > 0
    good, salad = perplexities(tmp_path / "lm.arpa.gz", [TEXT * 3, " ".join(reversed(TEXT.split())) * 3])
    assert good < salad
    side = write_sidecar(tmp_path / "lm.arpa.gz", info)
    assert json.loads(side.read_text())["order"] == 3
    # no threshold is set yet (it is chosen from these values): a text the rule reads has
    # its perplexity; one it does not judge (too few tokens) is NaN, never a value that
    # would move the threshold
    read, short = perplexities(tmp_path / "lm.arpa.gz", [TEXT * 3, "Too short."])
    assert math.isfinite(read) and read == good and math.isnan(short)


def test_train_lm_needs_a_wcxb_checkout(tmp_path):
    res = CliRunner().invoke(quality, ["train-lm", "--wcxb", str(tmp_path), "--out", str(tmp_path / "m.arpa")])
    assert res.exit_code == 2 and "no dev/ folder" in res.output


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_train_lm_checks_its_numbers(tmp_path, bad):
    res = CliRunner().invoke(quality, ["train-lm", "--wcxb", str(tmp_path), "--out", "m.arpa", "--per-kind", bad])
    assert res.exit_code == 2


def test_development_report_chooses_on_good_text_and_reports_junk_by_kind(tmp_path):
    texts = [KindText(text=TEXT * 2 + f"Item {i} of the list was read aloud by the clerk.\n", source="wcxb",
                      kind="article", unit=f"site{i}.example", id=f"t{i}", topic="politics") for i in range(30)]
    lm = tmp_path / "lm.arpa"
    train_word_lm(texts, lm)
    report = development_report(lm, texts, texts, {}, lambda items: [True] * len(items), per_kind=2, seed=1)
    assert report["good_texts"] == 30
    assert report["threshold"] >= report["good_perplexity_quantiles"][0.99]
    salad = report["junk_rejected_by_kind"]["word_salad"]
    assert salad["n"] == 2 and salad["rejected_by_others"] == 0.0 and salad["rejected"] >= salad["rejected_by_others"]
