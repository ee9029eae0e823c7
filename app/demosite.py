"""The bundled demo web site (``app/demo_site/site.yaml``) rendered into servable pages.

Pages are rendered with each host's navigation and footer, so extraction has real
boilerplate to strip; the planted problems (near-duplicate, personal data, profanity,
a benchmark quote, a foreign-language page, a robots-disallowed section, three hosts that
opt out of training) are listed at
the top of ``site.yaml``. The result feeds :class:`afm.crawler.testsite.LocalSites`.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from afm.config import load_yaml

SITE_FILE = "demo_site/site.yaml"

# Member directory: invented people on invented (non-example) domains, so the PII
# filter sees realistic personal data (example.com is deliberately treated as benign).
_DIRECTORY = [
    ("Alice Moreau", "alice.moreau@postbox-mail.net", "+44 20 7946 0011", "14 Elm Road"),
    ("Bram de Vries", "bram.devries@quickmail.org", "+31 20 555 0123", "3 Canal Street"),
    ("Chen Wei", "chen.wei@letterbox.io", "+1 415 555 0134", "88 Harbor Avenue"),
    ("Dana Kowalski", "dana.k@fastpost.net", "+1 212 555 0187", "201 Pine Street"),
    ("Emeka Obi", "emeka.obi@mailroom.org", "+44 161 496 0420", "7 Mill Lane"),
    ("Fatima Zahra", "f.zahra@inboxly.net", "+33 1 23 45 67 89", "12 Rue des Lilas"),
    ("Gustav Lind", "gustav.lind@nordmail.se", "+46 8 123 456 78", "5 Storgatan"),
    ("Hana Sato", "hana.sato@postbox-mail.net", "+81 3 1234 5678", "2-1 Sakura Dori"),
]


def load_spec() -> dict[str, Any]:
    text = resources.files("afm.app").joinpath(SITE_FILE).read_text(encoding="utf-8")
    return load_yaml(text, SITE_FILE)


def demo_benchmark_question() -> str | None:
    """The first question of the demo benchmark set, if the decontamination data ships."""
    try:
        root = resources.files("afm.filters").joinpath("data/benchmarks")
        files = sorted(p for p in root.iterdir() if p.name.startswith("demo-math"))
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        return None
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                return record.get("question") or record.get("prompt") or record.get("text")
    return None


def _page(title: str, nav: list[str], footer: str, body_html: str) -> str:
    nav_html = " ".join(f'<li><a href="/">{html.escape(n)}</a></li>' for n in nav)
    return (
        "<!DOCTYPE html>\n<html lang=\"{lang}\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title></head><body>"
        f'<header><nav><ul class="menu">{nav_html}</ul></nav>'
        '<div class="cookie-banner">We use cookies to improve your experience. '
        '<a href="/">Accept all</a> <a href="/">Manage preferences</a></div></header>'
        f"<main><article><h1>{html.escape(title)}</h1>{body_html}</article></main>"
        '<aside class="sidebar"><h3>Popular</h3><ul><li><a href="/">Most read today</a></li>'
        '<li><a href="/">Editor\'s picks</a></li><li><a href="/">Newsletter sign-up</a></li></ul></aside>'
        f'<footer><p>{html.escape(footer)}</p></footer></body></html>'
    )


def _links_html(links: list[str]) -> str:
    items = "".join(f'<li><a href="{html.escape(u)}">{html.escape(u)}</a></li>' for u in links)
    return f"<ul class=\"links\">{items}</ul>"


def render_site() -> dict[str, dict[str, dict[str, Any]]]:
    """``{host: {path: {"body": str, "status": int, "headers": dict}}}``; bodies may
    still contain ``{{host:NAME}}`` placeholders for the server to rewrite."""
    spec = load_spec()
    question = demo_benchmark_question()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for host, hspec in spec["hosts"].items():
        pages: dict[str, dict[str, Any]] = {}
        nav, footer = hspec.get("nav", []), hspec.get("footer", "")
        lang = "fr" if host == "intl" else "en"
        for path, p in hspec.get("pages", {}).items():
            paras = list(p.get("paragraphs", []))
            if p.get("benchmark_quote") and question:
                paras.insert(1, question)
            body = "".join(f"<p>{html.escape(t)}</p>" for t in paras)
            if p.get("directory"):
                rows = "".join(
                    f"<tr><td>{html.escape(n)}</td><td>{html.escape(e)}</td><td>{html.escape(t)}</td>"
                    f"<td>{html.escape(a)}</td></tr>"
                    for n, e, t, a in _DIRECTORY
                )
                body += f"<table><tr><th>Name</th><th>Email</th><th>Phone</th><th>Address</th></tr>{rows}</table>"
            if p.get("boilerplate_heavy"):
                promos = "".join(
                    f'<div class="promo"><a href="/">Deal #{i}: save {5 * i}% today only</a> '
                    '<a href="/">Shop now</a> <a href="/">Share</a></div>'
                    for i in range(1, 40)
                )
                body += promos
            if p.get("links"):
                body += _links_html(p["links"])
            doc = _page(p.get("title", host), nav, footer, body).replace("{lang}", lang)
            headers = {"Content-Type": "text/html; charset=utf-8", **hspec.get("headers", {})}
            pages[path] = {"body": doc, "status": 200, "headers": headers}
        if "robots" in hspec:
            pages["/robots.txt"] = {
                "body": hspec["robots"],
                "status": 200,
                "headers": {"Content-Type": "text/plain"},
            }
        if host == "news":
            urls = "".join(
                f"<url><loc>{{{{host:news}}}}{path}</loc></url>" for path in hspec.get("pages", {})
                if not path.startswith("/private")
            )
            pages["/sitemap.xml"] = {
                "body": f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>',
                "status": 200,
                "headers": {"Content-Type": "application/xml"},
            }
        out[host] = pages
    return out


def later_robots() -> dict[str, str]:
    """``{host: robots.txt}`` that hosts serve *after* the demo crawl (an opt-out added
    later: ``afm demo`` snapshots it and curate's newest snapshot wins)."""
    return {host: h["later_robots"] for host, h in load_spec()["hosts"].items()
            if "later_robots" in h}


def optout_hosts() -> set[str]:
    """Hosts whose every page curate must drop as a training opt-out (``optout: true``)."""
    return {host for host, h in load_spec()["hosts"].items() if h.get("optout")}


def seed_paths() -> list[tuple[str, str]]:
    """Where the demo crawl starts: every host's front page or first page."""
    spec = load_spec()
    seeds = []
    for host, hspec in spec["hosts"].items():
        paths = list(hspec.get("pages", {}))
        seeds.append((host, "/" if "/" in paths else paths[0]))
    return seeds


def write_static_copy(out_dir: Path) -> Path:
    """Write the rendered site as files (``host/path.html``), for browsing or other tools."""
    for host, pages in render_site().items():
        for path, page in pages.items():
            name = path.strip("/") or "index"
            target = out_dir / host / (name if "." in name else name + ".html")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(page["body"], encoding="utf-8")
    return out_dir
