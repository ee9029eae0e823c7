"""A small crawl with one planted problem per curate stage, written as real WARC (by the
crawler's own WarcStore when it is installed).

Every page is defined here (original text written for these tests). The planted
problems: an exact duplicate under another URL with different boilerplate, a page with
an e-mail address and a phone number (PII), a profane rant, a page that quotes a question
of the project's demo benchmark set (contamination), a page that is only navigation and
footer (boilerplate), a French page (language), and a 404 response.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pytest

from tests.paths import ROOT

NAV = ("<nav><ul><li><a href='/'>Home</a></li><li><a href='/news'>News</a></li>"
       "<li><a href='/about'>About us</a></li><li><a href='/shop'>Shop</a></li></ul></nav>")
FOOTER = ("<footer><p>Subscribe to our newsletter for weekly updates.</p>"
          "<p>Cookie settings | Privacy policy | Terms of use</p>"
          "<p>Copyright 2024 Riverside Gazette. All rights reserved.</p></footer>")
BOILERPLATE_MARKERS = ("Subscribe to our newsletter", "Cookie settings", "All rights reserved")

ARTICLES = {
    "orchard": (
        "How an old orchard came back to life",
        [
            "When the Hartley family bought the farm on the edge of the valley, the apple "
            "orchard behind the barn had not been pruned for almost twenty years. Branches "
            "crossed each other, moss covered the bark, and most of the trees produced only "
            "a handful of small, sour fruit each autumn.",
            "Instead of clearing the land, they decided to restore it slowly. Each winter "
            "they cut back a third of the oldest wood, opened the centre of every crown to "
            "let in light, and spread compost from the village around the roots.",
            "The first years were discouraging. Some trees answered the pruning with a "
            "forest of thin water shoots, and a late frost destroyed nearly all of the "
            "blossom in the second spring. A neighbour who had grown apples for decades "
            "told them to be patient and to thin the shoots in summer rather than cut more.",
            "By the fifth season the change was obvious to anyone walking along the lane. "
            "The trees carried heavy crops of firm, sweet apples, the grass between the rows "
            "was full of clover, and bees from three local hives worked the flowers every "
            "morning. The family now sells juice at the weekly market and runs a pruning "
            "course for other owners of neglected orchards.",
        ],
    ),
    "bridge": (
        "The engineers who rebuilt the river bridge",
        [
            "The stone bridge over the river had carried carts, then cars, then heavy "
            "lorries for more than a century before inspectors found cracks in two of its "
            "arches. Closing it would have added an hour to the journey of every commuter "
            "on the eastern side of town.",
            "The council asked a small team of engineers to repair the structure while "
            "keeping one lane open. They began by measuring how each arch moved as traffic "
            "passed, fixing sensors to the stones and recording the data for a month.",
            "The measurements showed that water had washed away part of the foundation "
            "under the central pier. Divers packed the gap with grout, and the team "
            "replaced the damaged stones one at a time, cutting new blocks from the same "
            "quarry that had supplied the original builders.",
            "The work took eighteen months and finished under budget. Today the sensors "
            "remain in place, sending readings to the council every hour, so that any new "
            "movement can be noticed long before it becomes dangerous for the people who "
            "cross the river each day.",
        ],
    ),
    "library": (
        "A village library that lends more than books",
        [
            "The library in the old schoolhouse is open only three days a week, yet it has "
            "become one of the busiest places in the village. Besides novels and picture "
            "books, its shelves now hold tools, sewing machines, telescopes and board games "
            "that anyone with a card can borrow for a fortnight.",
            "The idea came from a volunteer who noticed how many people bought a drill for "
            "a single job and then left it in a cupboard for years. She asked neighbours "
            "to donate the things they rarely used, and within a month the back room was "
            "full.",
            "Borrowers write a short note about what they made or repaired, and the notes "
            "are pinned to a board near the entrance. Reading them has become a small "
            "pleasure of its own: a rebuilt garden fence, a wedding dress altered for a "
            "granddaughter, the rings of Saturn seen for the first time.",
            "Other villages in the county have visited to learn how the scheme works, and "
            "two of them have opened similar collections this year.",
        ],
    ),
    "ferry": (
        "Contacting the island ferry office",
        [
            "The ferry to the island runs four times a day in summer and twice a day in "
            "winter, weather permitting. Crossings take about forty minutes, and bicycles "
            "travel free of charge on every sailing.",
            "Tickets can be bought at the harbour kiosk or on board, but groups of more "
            "than ten people should book in advance because the passenger deck is small. "
            "Dogs are welcome on the open deck as long as they stay on a lead.",
            "For bookings and questions about timetables, write to Martha Quinn at "
            "martha.quinn@islandferry-office.org or call her on +1 415 555 0132 between "
            "nine in the morning and five in the afternoon.",
            "When storms are forecast, the office publishes changes to the timetable by "
            "noon on the day before, and passengers with bookings are informed by e-mail.",
        ],
    ),
}

RANT = (
    "Why I am done with this stupid town council",
    [
        "This fucking council is a joke and every shit decision they make proves it. "
        "The bastards closed the fucking pool, the fucking park and the shit library "
        "in one year.",
        "These assholes never listen. The fucking mayor is a dickhead, his deputy is a "
        "bastard and the whole shitty committee are assholes who only care about "
        "their fucking salaries.",
        "I am sick of this bullshit and of the fucking lies.",
    ],
)

FRENCH = (
    "Le marché du samedi",
    [
        "Chaque samedi matin, la place du village se remplit de marchands venus des "
        "fermes voisines. On y trouve des fromages, du pain encore chaud, des légumes "
        "de saison et des fleurs coupées le jour même.",
        "Les habitants aiment s'y retrouver pour prendre un café et discuter des "
        "nouvelles de la semaine, pendant que les enfants jouent autour de la fontaine.",
        "Depuis quelques années, de jeunes producteurs ont rejoint le marché et proposent "
        "des jus de pomme, du miel et des confitures préparées avec des fruits locaux.",
    ],
)


def demo_benchmark_question() -> str | None:
    """The first question of the decontamination helper's demo benchmark set, if shipped."""
    path = ROOT / "filters" / "data" / "benchmarks" / "demo-math.jsonl"
    if not path.exists():
        return None
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    return str(first["question"])


def render(title: str, paragraphs: list[str], nav: str = NAV, footer: str = FOOTER,
           lang: str = "en") -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (f"<!doctype html><html lang='{lang}'><head><meta charset='utf-8'><title>{title}"
            f"</title></head><body>{nav}<main><article><h1>{title}</h1>{body}</article>"
            f"</main>{footer}</body></html>")


def site_pages() -> list[tuple[str, int, str]]:
    """``(url, status, html)`` of the test crawl, one planted problem per page."""
    base = "http://riverside.test"
    pages = [(f"{base}/{key}", 200, render(title, paras)) for key, (title, paras) in ARTICLES.items()]
    # Exact duplicate of the orchard story: other URL, other navigation and footer.
    title, paras = ARTICLES["orchard"]
    pages.append(("http://mirror.test/stories/orchard-copy", 200, render(
        title, paras, nav="<nav><a href='/'>Start</a> <a href='/top'>Top stories</a></nav>",
        footer="<footer><p>Mirror site footer with links.</p></footer>")))
    pages.append((f"{base}/rant", 200, render(*RANT)))
    pages.append((f"{base}/marche", 200, render(*FRENCH, lang="fr")))
    question = demo_benchmark_question()
    if question:
        pages.append((f"{base}/homework-help", 200, render(
            "Homework help: a cookie problem",
            ["A reader sent us this word problem from her son's homework and asked how "
             "to explain it without simply giving away the answer.",
             question,
             "Our advice is to draw the trays first, then count what is left after the "
             "gift, and only then think about the bags. Children who draw the problem "
             "usually find the answer on their own and remember the method much longer.",
             # An article around the question, so that every stage before decontamination
             # (the quality model among them) keeps it and decontamination is what drops it.
             "The problem itself is a good example of why. It asks the reader to keep track of "
             "several quantities at once: what was baked, what was given away and how the rest is "
             "shared. Each step is simple, but holding all of them in mind is not, and that is "
             "exactly where a drawing helps.",
             "Some parents worry that drawing is slow. In our experience it is slow only the first "
             "few times. After a week or two most children sketch a problem in under a minute, and "
             "they make far fewer mistakes than when they try to calculate straight from the text.",
             "If your child is stuck, resist the urge to explain the arithmetic. Ask them to tell "
             "you the story of the problem in their own words, then to show it on paper. The answer "
             "usually follows."])))
    pages.append((f"{base}/links", 200, "<html><head><title>Links</title></head><body>"
                  + NAV + FOOTER + "</body></html>"))
    pages.append((f"{base}/gone", 404, "<html><body><h1>Not found</h1></body></html>"))
    return pages


def write_warc(path: Path, pages: list[tuple[str, int, str]]) -> Path:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    fetched = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i, (url, status, html) in enumerate(pages):
            reason = "OK" if status == 200 else "Not Found"
            headers = StatusAndHeaders(f"{status} {reason}",
                                       [("Content-Type", "text/html; charset=utf-8")],
                                       protocol="HTTP/1.1")
            date = (fetched + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(html.encode("utf-8")),
                http_headers=headers, warc_headers_dict={"WARC-Date": date})
            writer.write_record(record)
    return path


def write_crawl(out_dir: Path, pages: list[tuple[str, int, str]]) -> Path:
    """The pages as the crawler stores them (its WarcStore: WARC + index + state dirs)."""
    from afm.crawler.storage.warc import WarcStore

    fetched = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    store = WarcStore(out_dir)
    for i, (url, status, html) in enumerate(pages):
        store.write(url, status, [("Content-Type", "text/html; charset=utf-8")],
                    html.encode("utf-8"), fetched_at=fetched + dt.timedelta(minutes=i))
    store.close()
    return out_dir


@pytest.fixture(scope="session")
def planted_warc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted crawl: a crawl directory written by the crawler's own WARC writer when
    it is installed (the curate input as users have it), else one warcio-written file."""
    tmp = tmp_path_factory.mktemp("crawl")
    try:
        return write_crawl(tmp / "crawl", site_pages())
    except ImportError:
        return write_warc(tmp / "site.warc.gz", site_pages())


@pytest.fixture(scope="session")
def planted_pages() -> list[tuple[str, int, str]]:
    return site_pages()


@pytest.fixture(scope="session")
def boilerplate_markers() -> tuple[str, ...]:
    return BOILERPLATE_MARKERS


@pytest.fixture(scope="session")
def warc_writer():
    """``write_warc(path, [(url, status, html), ...])``: gzip-per-record WARC, one minute
    between records' WARC-Dates (later records are fetched later)."""
    return write_warc


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The decontamination index of the project's demo benchmark set."""
    from afm.filters.benchmarks import DATA_DIR, build_index

    out = tmp_path_factory.mktemp("demo-index") / "idx"
    build_index(str(DATA_DIR), out)
    return out
