"""Good text of many kinds: gold main texts with their kind and unit, manual pages rendered
as a browser shows them, package documentation, standard-library reference pages, topics."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from afm.filters.extraction.gold import GoldPage
from afm.filters.quality.texts import (
    gold_texts,
    man_page_texts,
    python_package_texts,
    render_man_page,
    stdlib_reference_texts,
)
from afm.filters.quality.topics import topic_of

WORDS = " ".join(f"word{i}" for i in range(60))


def test_gold_texts_kind_unit_and_topic():
    pages = [GoldPage("wcxb-forum", "7", "https://www.forum.example/t/1", b"", truth="The election " + WORDS),
             GoldPage("utomo-chaos", "chaos-all/affair (3)", None, b"", truth="police court " + WORDS),
             GoldPage("utomo-big5", "big5-05/abc (1)", None, b"", truth=WORDS),
             GoldPage("scrapinghub", "x", "http://news.example/a", b"", truth="too short")]
    texts = gold_texts(pages)
    assert [(t.source, t.kind, t.unit) for t in texts] == [
        ("wcxb", "forum", "forum.example"), ("utomo-chaos", "article", "chaos-all/affair"),
        ("utomo-big5", "article", "big5-05")]
    assert gold_texts(pages, kinds=("forum",))[0].id == "wcxb-forum/7"


def test_topics_by_keyword_counts():
    assert topic_of("The president lost the election after the senate vote on the new policy.") == "politics"
    assert topic_of("Patients at the hospital waited for the doctor; the vaccine trial treatment.") == "health"
    assert topic_of("A quiet afternoon.") == "other"


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_a_manual_page_renders_one_paragraph_a_line(tmp_path: Path):
    src = (".TH FROB 1 2024 frob \"User Commands\"\n.SH NAME\nfrob \\- frobnicate files\n.SH DESCRIPTION\n"
           "The\n.B frob\ncommand frobnicates each file named on its command line and writes the result\n"
           "next to it, keeping the original untouched unless told otherwise.\n.SH OPTIONS\n.TP\n"
           ".B \\-n\nDo nothing; print what would be done.\n")
    text = render_man_page(src)
    assert "FROB(1)" not in text  # the running header and footer are chrome
    assert ("The frob command frobnicates each file named on its command line and writes the result "
            "next to it, keeping the original untouched unless told otherwise.") in text.splitlines()
    root = tmp_path / "man"
    (root / "man1").mkdir(parents=True)
    (root / "man1" / "frob.1").write_text(src + ".PP\n" + " ".join(["More text for the page."] * 12) + "\n")
    (root / "man1" / "frob-extra.1").write_text(src)  # same family: one page per family
    (root / "man1" / "stub.1").write_text(".so man1/frob.1\n")
    pages = man_page_texts(root, sections=("1",), limit=5)
    assert len(pages) == 1 and pages[0].unit == "frob" and pages[0].kind == "manual"
    assert man_page_texts(root, sections=("1",), exclude_units={"frob"}) == []


def test_package_descriptions_and_guides(tmp_path: Path):
    site = tmp_path / "site-packages"
    (site / "frob-1.0.dist-info").mkdir(parents=True)
    (site / "frob-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: frob\nVersion: 1.0\n\n# frob\n\n" + WORDS + "\n")
    (site / "frob" / "docs").mkdir(parents=True)
    (site / "frob" / "docs" / "guide.md").write_text("# Guide\n\n" + WORDS + " guide\n")
    (site / "frob" / "tests").mkdir()
    (site / "frob" / "tests" / "notes.md").write_text(WORDS + " tests\n")
    texts = python_package_texts([site])
    assert sorted(t.kind for t in texts) == ["description", "guide"]
    assert {t.unit for t in texts} == {"frob"} and not any("Metadata-Version" in t.text for t in texts)


def test_stdlib_reference_pages_are_parsed_not_imported(tmp_path: Path):
    (tmp_path / "frobmod.py").write_text(
        '"""Frobnicate things.\n\n' + WORDS + '"""\n\ndef frob(x, *, times=2):\n'
        '    """Frobnicate x, times times over."""\n\nraise SystemExit("never imported")\n')
    [page] = stdlib_reference_texts(tmp_path)
    assert page.unit == "frobmod" and "frob(x, *, times=2)\nFrobnicate x, times times over." in page.text
