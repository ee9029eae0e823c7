"""Extraction's early language check: pages the language stage will drop skip trafilatura,
pages it keeps are extracted exactly as without the check."""

from __future__ import annotations

import pytest

pytest.importorskip("resiliparse")
pytest.importorskip("fasttext")

from afm.filters.extract import ExtractConfig, Extractor  # noqa: E402

GERMAN = ("Die Stadtverwaltung hat am Montag bekanntgegeben, dass die Sanierung der alten "
          "Brücke über den Fluss im kommenden Frühjahr beginnen soll. Nach Angaben der "
          "Behörden werden die Arbeiten etwa zwei Jahre dauern, und der Verkehr wird in "
          "dieser Zeit über eine Umleitung durch das Gewerbegebiet geführt. ")
ENGLISH = ("The city council announced on Monday that the repair of the old bridge over the "
           "river will begin next spring. According to the authorities the work will take "
           "about two years, and traffic will be diverted through the industrial estate. ")


def _page(text: str) -> bytes:
    paragraphs = "".join(f"<p>{text}</p>" for _ in range(4))
    return (f"<html><head><title>News</title></head><body><nav><a href='/'>Home</a></nav>"
            f"<article><h1>Bridge</h1>{paragraphs}</article><footer>(c) 2024</footer>"
            f"</body></html>").encode()


def _record(body: bytes) -> dict:
    return {"url": "https://news.example/a", "status": 200, "headers": {}, "body": body}


def test_a_page_in_another_language_is_dropped_before_extraction() -> None:
    decision = Extractor(ExtractConfig(early_language=["en"]))(_record(_page(GERMAN)))
    assert not decision.keep and decision.reason == "language_not_kept"
    assert decision.details["early"] is True and decision.details["language"] == "de"
    # Without the check the same page is extracted (the language stage would drop it).
    assert Extractor(ExtractConfig(early_language=[]))(_record(_page(GERMAN))).keep


def test_a_kept_language_is_extracted_exactly_as_without_the_check() -> None:
    with_check = Extractor(ExtractConfig(early_language=["en"]))(_record(_page(ENGLISH)))
    without = Extractor(ExtractConfig())(_record(_page(ENGLISH)))
    assert with_check.keep and without.keep
    assert with_check.document["text"] == without.document["text"]
    assert Extractor(ExtractConfig(early_language=["en", "de"]))(_record(_page(GERMAN))).keep


def test_the_check_follows_the_language_stage() -> None:
    from afm.pipelines.curate.config import load_curate_config

    def extract_cfg(**sections):
        return next(s for s in load_curate_config(sections).resolve() if s.name == "extract").config

    on = extract_cfg(language={"params": {"keep": ["en", "fr"], "min_score": 0.9}})
    assert on.early_language == ["en", "fr"] and on.early_language_score == 0.9
    assert extract_cfg(language={"enabled": False}).early_language == []
    assert extract_cfg(language={"params": {"keep": []}}).early_language == []
    assert extract_cfg(extract={"params": {"early_language": []}}).early_language == []


def test_a_page_opening_in_another_language_is_judged_on_its_whole_text() -> None:
    body = (f"<html><body><article><p>{GERMAN * 4}</p>"
            + "".join(f"<p>{ENGLISH}</p>" for _ in range(14)) + "</article></body></html>")
    decision = Extractor(ExtractConfig(early_language=["en"]))(_record(body.encode()))
    assert decision.keep
