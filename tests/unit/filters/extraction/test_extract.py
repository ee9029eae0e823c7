"""Extraction: real-looking pages, charsets, and every kind of bad input."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from afm.app.bench.filters.filters import evaluate_extractor, load_extraction_benchmark
from afm.filters.extract import (
    ExtractConfig,
    Extractor,
    decode_html,
    extract_html,
    extract_title,
    looks_binary,
    trim_teaser_lines,
)

ARTICLE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Night trains return to the Alps | The Daily Rail</title>
<meta property="og:title" content="Night trains return to the Alps">
</head><body>
<header><nav><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a>
<a href="/login">Log in</a> <a href="/subscribe">Subscribe</a></nav></header>
<div class="sidebar"><h3>Most read</h3><ul><li><a href="/a">Ten best beaches</a></li>
<li><a href="/b">Why cats purr</a></li></ul></div>
<main><article>
<h1>Night trains return to the Alps</h1>
<p class="byline">By Anna Keller, 18 November 2019</p>
<p>For the first time in a decade, a sleeper service will link Zurich with the ski towns of
the eastern Alps, the railway operator announced on Monday, betting that travellers tired
of airport queues will pay for a bed on rails.</p>
<p>The train will leave Zurich at ten in the evening and reach the valley before breakfast.
Each carriage has couchettes for six people as well as private compartments with a washbasin,
and the operator says prices will start at the cost of a budget flight.</p>
<p>Rail advocates welcomed the plan. "Night trains were written off too early," said one
campaigner, who added that demand on the Vienna and Hamburg routes had doubled since 2016.</p>
<p>SEE MORE: The ten most scenic railway journeys in Europe</p>
<p>The first departures are planned for next December, once the new timetable takes effect,
and tickets will go on sale in the spring.</p>
</article></main>
<footer><p>Copyright 2019 The Daily Rail. All rights reserved.</p>
<a href="/privacy">Privacy</a> <a href="/terms">Terms</a></footer>
</body></html>"""


def page(body: bytes | str, **kw) -> dict:
    if isinstance(body, str):
        body = body.encode("utf-8")
    return {"url": kw.pop("url", "https://rail.example.org/news/night-trains"), "status": 200,
            "headers": kw.pop("headers", {"Content-Type": "text/html"}), "body": body,
            "fetched_at": kw.pop("fetched_at", None), **kw}


@pytest.fixture(scope="module")
def extractor() -> Extractor:
    return Extractor()


def test_article_main_text_title_and_metadata(extractor):
    when = dt.datetime(2019, 11, 18, tzinfo=dt.UTC)
    d = extractor(page(ARTICLE, fetched_at=when))
    assert d.keep and d.document is not None
    doc = d.document
    assert "sleeper service will link Zurich" in doc["text"]
    assert "tickets will go on sale in the spring" in doc["text"]
    assert "Ten best beaches" not in doc["text"] and "All rights reserved" not in doc["text"]
    assert "SEE MORE" not in doc["text"]  # teaser line trimmed
    assert doc["title"] == "Night trains return to the Alps"
    assert doc["source"] == "web" and doc["fetched_at"] == when
    assert doc["url"] == "https://rail.example.org/news/night-trains" and len(doc["id"]) == 20
    assert d.signals["text_words"] > 100 and d.signals["html_bytes"] == len(ARTICLE.encode())
    assert extractor.name == "extract"


@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        ("<html><head><meta charset='windows-1252'></head><body><p>Café crème</p></body></html>"
         .encode("cp1252"), {}, ("Café crème", "meta")),
        ("<p>Ein Straßencafé</p>".encode("cp1252"), {"Content-Type": "text/html; charset=ISO-8859-1"},
         ("Straßencafé", "header")),
        # Header lies (says UTF-8) and there is no meta: detection must take over.
        ("<p>Le café était très animé à l'époque où les élèves arrivaient.</p>".encode("cp1252"),
         {"Content-Type": "text/html; charset=utf-8"}, ("café était très", "detected")),
        ("\ufeff<p>naïve résumé</p>".encode("utf-16-le"), {}, ("naïve résumé", "bom")),
        ("<p>日本語のページです</p>".encode(), {}, ("日本語", "utf-8")),
        # UTF-8 with one corrupt byte stays UTF-8 (not re-detected as a single-byte codec).
        (("<p>naïve café</p>" * 40).encode()[:-30] + b"\xff" + b"</p>", {},
         ("naïve café", "utf-8-lenient")),
    ],
)
def test_charset_detection(body, headers, expected):
    text, _codec, source = decode_html(body, headers)
    assert expected[0] in text
    assert source == expected[1]


def test_shift_jis_page_end_to_end(extractor):
    html = ("<html><head><meta http-equiv='Content-Type' content='text/html; charset=Shift_JIS'>"
            "<title>東京の天気</title></head><body><article>"
            + "<p>今日の東京は晴れのち曇りで、午後から風が強くなる見込みです。気温は平年並みです。</p>" * 6
            + "</article></body></html>")
    d = extractor(page(html.encode("shift_jis"), headers={}))
    assert d.keep and "東京は晴れ" in d.document["text"]
    assert d.details["charset"] == "shift_jis" and d.details["charset_source"] == "meta"


@pytest.mark.parametrize(
    ("body", "kw", "reason"),
    [
        (b"", {}, "empty_extraction"),
        (b"   \n\t ", {}, "empty_extraction"),
        (b"<html><head><title>x</title></head><body><div></div></body></html>", {}, "empty_extraction"),
        (b"<html><body><script>var a = 1;</script><style>p{}</style></body></html>", {}, "empty_extraction"),
        (b"\x89PNG\r\n\x1a\n" + os.urandom(2000), {}, "binary_content"),
        (b"%PDF-1.7\n" + os.urandom(2000), {}, "binary_content"),
        (bytes(range(256)) * 20, {}, "binary_content"),
        (ARTICLE.encode(), {"status": 404}, "http_status"),
        (ARTICLE.encode(), {"status": "oops"}, "http_status"),
        (ARTICLE.encode(), {"headers": {"content-type": "image/jpeg"}}, "unsupported_content_type"),
        (b"<p>" + b"word " * 1_100_000 + b"</p>", {}, "too_large"),  # 5.5 MB
    ],
)
def test_bad_input_gets_a_clear_reason(extractor, body, kw, reason):
    d = extractor(page(body, **kw))
    assert not d.keep
    assert d.reason == reason


def test_headers_as_pairs_or_garbage(extractor):
    body = ARTICLE.replace('<meta charset="utf-8">', "").replace("Zurich", "Zürich")
    d = extractor(page(body.encode("cp1252"),
                       headers=[("Content-Type", "text/html; charset=windows-1252")]))
    assert d.keep and d.details["charset_source"] == "header" and "Zürich" in d.document["text"]
    for junk in (42, ["oops"], None):
        assert extractor(page(ARTICLE, headers=junk)).keep


def test_body_of_wrong_type_and_missing_fields(extractor):
    assert extractor({"body": 12345}).reason == "bad_record"
    d = extractor({"body": "<html><body><article><p>" + "A plain string body works too. " * 20
                   + "</p></article></body></html>"})
    assert d.keep and d.document["url"] is None


def test_broken_and_pathological_html_never_crashes(extractor):
    broken = ("<html><body><div><p>Unclosed paragraph about rivers and their deltas, which "
              "build wide plains over thousands of years<p>and another <b>bold <i>claim</b> "
              "that floods renew the soil of the plain every spring</div></span></table>" * 5)
    d = extractor(page(broken))
    assert d.keep and "deltas" in d.document["text"]
    deep = "<div>" * 20_000 + "<p>deep text in a deeply nested page</p>" + "</div>" * 20_000
    d = extractor(page(deep))
    assert d.reason in (None, "empty_extraction", "extraction_error")
    garbage = os.urandom(5000).replace(b"\x00", b" ")
    d = extractor(page(b"<html>" + garbage))
    assert d.reason in (None, "binary_content", "empty_extraction", "decode_error", "extraction_error")


def test_large_limit_is_configurable():
    body = ("<html><body><article>" + "<p>Readable paragraph about local news and events.</p>" * 50
            + "</article></body></html>").encode()
    assert Extractor(ExtractConfig(max_bytes=100))(page(body)).reason == "too_large"
    assert Extractor(ExtractConfig(max_bytes=len(body)))(page(body)).keep


def test_helpers():
    assert looks_binary(b"\x00\x01\x02\x03" * 100) and not looks_binary(b"<html>hello</html>")
    assert extract_title("<title>A &amp; B</title>") == "A & B"
    assert extract_title("<html><body>no title</body></html>") is None
    body = "The main story goes on for a while, sentence after sentence. " * 5
    text, n = trim_teaser_lines(f"Intro.\nRelated: other story\n{body}\nBody text [VIDEO]\n"
                                "[button x]Go[/button]\nEnd.")
    assert text == f"Intro.\n{body}\nEnd." and n == 3
    assert trim_teaser_lines("The related question is open.")[1] == 0
    assert extract_html(ARTICLE).startswith("For the first time") or "sleeper" in extract_html(ARTICLE)
    assert extract_html(b"") == ""


def test_real_benchmark_pages_score_well(shared_eval, extractor):
    pages = load_extraction_benchmark(shared_eval, limit=20)
    assert len(pages) == 20

    def ours(body, url):
        d = extractor(page(body, url=url, headers={}))
        return d.document["text"] if d.keep else ""

    scores = evaluate_extractor(pages, ours)
    assert scores["f1"] > 0.93 and scores["precision"] > 0.9 and scores["recall"] > 0.9


# ------------------------------------------------------------------- issue 13 regressions


def _story(n: int) -> str:
    return "".join(f"<p>The river authority said on Tuesday that the flood defences built after "
                   f"storm number {i} had held, although fields near the old mill were under "
                   "water for a week and farmers counted the cost of lost winter crops.</p>"
                   for i in range(n))


def test_teaser_rule_never_removes_an_article_in_a_layout_table():
    """Issue 13: trafilatura renders a layout-table row as one line starting with
    "Advertisement"; the teaser trimmer dropped that line, i.e. the whole article, and
    the page became empty_extraction."""
    html = (f"<html><head><title>Floods</title></head><body><table><tr><td>Advertisement</td>"
            f"<td>{_story(25)}</td></tr></table></body></html>").encode()
    d = Extractor()(page(html))
    assert d.keep, d.reason
    assert d.signals["text_words"] > 900 and "storm number 24" in d.document["text"]


def test_teaser_rule_limits():
    long_line = "Related stories and " + "more words of a real paragraph " * 10
    assert trim_teaser_lines(f"{long_line}\nA short line.", max_words=30)[1] == 0
    # Candidates that hold most of the text: nothing is trimmed.
    text = "Read more: one\nRead more: two\nRead more: three\nBody."
    assert trim_teaser_lines(text, max_share=0.5) == (text, 0)


def test_length_comparison_runs_on_every_page(monkeypatch):
    """Issue 13: precision mode kept only an author box of 110-350 words, just above the
    old 100-word fallback floor, while the balanced pass found the 1,000-3,000-word
    article. The passes are compared on every page, whatever the primary's length."""
    box = " ".join(["Jane Doe covers transport and housing for the Gazette."] * 25)  # ~225 words
    article = " ".join(["The committee approved the harbour plan after a long debate."] * 150)
    html = f"<html><body><div>{box}</div><div>{article}</div></body></html>"
    ex = Extractor(ExtractConfig(method="rules"))

    def passes(self, html, url, precision):
        return box if precision else article

    monkeypatch.setattr(Extractor, "_trafilatura", passes)
    text, signals = ex.extract_text(html)
    assert text == article and signals["fallback_used"] == 1.0
    # A balanced pass only a little longer does not replace the precision pass.
    def close(self, html, url, precision):
        return box if precision else box + " " + box[:400]

    monkeypatch.setattr(Extractor, "_trafilatura", close)
    assert ex.extract_text(html)[0] == box


def test_second_pass_skipped_only_when_it_cannot_win(monkeypatch):
    calls = []

    def passes(self, html, url, precision):
        calls.append(precision)
        return "short primary text of five words" if precision else "x"

    monkeypatch.setattr(Extractor, "_trafilatura", passes)
    rules = Extractor(ExtractConfig(method="rules"))
    rules.extract_text("<p>" + "word " * 10 + "</p>")  # 10 < 4 x 6 words: cannot win
    assert calls == [True]
    rules.extract_text("<p>" + "word " * 30 + "</p>")  # it could: run it
    assert calls == [True, True, False]
