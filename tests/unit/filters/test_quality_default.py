"""The default quality model's recipe: units held out together, the threshold that keeps
the target share of held-out good text, the test report, and the bar for being on."""

from __future__ import annotations

import numpy as np
import pytest

from afm.filters.quality.defaults import (
    HeldOutSets,
    choose_settings,
    earns_its_place,
    held_out_report,
    held_out_unit,
    training_set,
)
from afm.filters.quality.texts import KindText

pytest.importorskip("fasttext")

SENTENCES = [
    "The council approved the budget for the new library after a long debate on Tuesday evening.",
    "Engineers measured how each arch of the old bridge moved as heavy lorries crossed the river.",
    "The recipe needs flour, butter and two eggs, and the dough should rest for an hour before baking.",
    "Researchers found that the glacier lost more ice this summer than in any year since records began.",
    "The team won the final match after scoring twice in the last ten minutes of the second half.",
    "Open the settings file, change the port number and restart the service so the change takes effect.",
    "Doctors advise patients to keep moving after the operation, walking a little further every day.",
    "Shares of the company fell sharply when it reported lower profits for the third quarter in a row.",
]


def _texts(n: int) -> list[KindText]:
    out = []
    for i in range(n):
        body = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(6))
        out.append(KindText(body, "toy", "article", f"site{i % 10}.example", f"toy/{i}", topic="other"))
    return out


def test_units_are_held_out_whole_and_seeded():
    units = [f"site{i}.example" for i in range(200)]
    side = [held_out_unit(u, 0.2) for u in units]
    assert 20 <= sum(side) <= 60 and side == [held_out_unit(u, 0.2) for u in units]
    assert side != [held_out_unit(u, 0.2, seed=1) for u in units]


def test_choice_keeps_the_target_share_of_held_out_good_text():
    ts = training_set(_texts(60), seed=0)
    assert len(ts.negatives) == len(ts.positives) == 60
    assert ts.counts()["units"] == 10
    chosen, rows = choose_settings(ts, grid=[{"epoch": 5, "lr": 0.5, "wordNgrams": 1, "dim": 16}],
                                   keep_target=0.9)
    # the threshold is the 10% quantile of the held-out good texts' scores (a handful here)
    assert chosen["threshold"] == rows[0]["val_threshold"] and 0.75 <= rows[0]["val_keep"] <= 1
    assert set(rows[0]["val_junk_rejected_by_kind"]) <= {j.kind for j in ts.negatives}


def test_report_and_the_bar_for_being_on():
    good = _texts(20)
    junk = training_set(good, seed=1).negatives
    scores = {t.text: 0.9 for t in good} | {j.text: (0.1 if j.kind == "machine_made" else 0.9) for j in junk}
    report = held_out_report(lambda texts: np.array([scores[t] for t in texts]), 0.5,
                         HeldOutSets({"toy": good}, junk, {t.id: "en" for t in good}))
    assert report["good"]["toy"]["model_keep"] == 1.0 and report["good"]["toy"]["n"] == 20
    chain = report["junk"]["machine_made"]
    assert chain["model_reject"] == 1.0 and chain["rules_pass"] <= chain["n"]
    assert report["junk"]["all"]["n"] == len(junk)
    verdict = earns_its_place(report)
    catch = report["junk"]["all"]["model_catches_of_rules_pass"]
    assert verdict["catches_of_rules_pass"] == catch
    assert (catch is None or catch < 0.5) == (not verdict["on_by_default"])
    bad = {"junk": {"all": {"model_catches_of_rules_pass": 0.8}},
           "good": {"news": {"both_keep": 0.95, "by_topic": {"politics": {"n": 30, "both_keep": 0.80},
                                                              "other": {"n": 30, "both_keep": 0.5}}}}}
    verdict = earns_its_place(bad)
    assert not verdict["on_by_default"] and "politics" in verdict["why_not"][0]
    bad["good"]["news"]["by_topic"]["politics"]["both_keep"] = 0.9
    assert earns_its_place(bad)["on_by_default"]  # 'other' is no topic
