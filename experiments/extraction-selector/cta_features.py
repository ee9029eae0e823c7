"""Issue 57: do calls to action around a block (form controls, links to sign-up or store pages, links
that leave the site) help the block model tell a promotion set inside the article from its text?

    python experiments/extraction-selector/cta_features.py CACHE GOLD_DIR

A first look with the trees alone (``trees_first_look.compare``) on the same records without and with five
new columns (records made since carry the prose-parent columns: taken off, as the first look had none).

The columns come from a second walk of each page: the package's Python walk (``blocks._Walk``, the
reference the C walk matches) extended to note, per block, the characters of links whose target is a
conversion page (subscribe, newsletter, sign up or in, register, donate, membership, trial, an app
store) or another site, and per container the form controls (``input`` other than hidden, ``button``,
``select``, ``textarea``) under it. The extended walk must cut the same blocks as the cached records
(checked per page: a page whose blocks differ is reported and keeps zeros). ``CtaWalk.walk`` is
``blocks._Walk.walk`` with the link-target and control counts added, a copy kept here: the columns did
not pass, so the package's walk (and its C twin) got no hooks for them."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from trees_first_look import compare

from afm.filters.extraction import block_train as bt
from afm.filters.extraction import blocks
from afm.filters.extraction.block_features import NAMES, PROSE_PARENT_NAMES
from afm.filters.extraction.gold import LOADERS
from afm.filters.extraction.table import decode
from afm.shared_data import find_shared_dir

CTA_NAMES = ("controls_in_parent", "controls_in_grand", "cta_link_share", "offsite_link_share",
             "window_cta_share")
CONTROLS = frozenset(("input", "button", "select", "textarea"))
# Link targets of conversion pages, as sites name them in their paths and hosts.
CTA_HREF = re.compile(r"subscri|newsletter|sign-?up|sign-?in|log-?in|regist|donat|member|/join"
                      r"|trial|/offer|checkout|apps\.apple\.com|play\.google\.com|itunes\.apple\.com",
                      re.I)
_LOG_CHARS = NAMES.index("log_chars")


def site_of(url: str | None) -> str:
    """The site a URL belongs to, approximated by its host's last two labels (three where the
    second-last is a short second-level label: ``bbc.co.uk``)."""
    if not url:
        return ""
    try:
        host = (urlsplit(url if "//" in url else "//" + url).hostname or "").removeprefix("www.")
    except ValueError:  # a malformed host ("https://[ccpa-preferences]")
        return ""
    labels = host.split(".")
    if len(labels) >= 3 and len(labels[-2]) <= 3 and len(labels[-1]) == 2:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


class CtaWalk(blocks._Walk):
    """``blocks._Walk`` noting, per block, its characters in conversion links and in links to
    other sites, and per container its form controls."""

    site = ""  # the page's site (set before each page)
    made: list[CtaWalk] = []

    def __init__(self, show_hidden: bool = False) -> None:
        super().__init__(show_hidden)
        self.cta: list[int] = []
        self.off: list[int] = []
        self.part_cta = self.part_off = 0
        self.href_kind = 0
        self.controls: dict[int, int] = {}
        CtaWalk.made.append(self)

    def flush(self, depth: int) -> None:
        before = len(self.texts)
        cta, off = self.part_cta, self.part_off
        self.part_cta = self.part_off = 0
        super().flush(depth)
        if len(self.texts) > before:
            self.cta.append(cta)
            self.off.append(off)

    def walk(self, node: object, depth: int) -> None:
        parts = self.parts
        for child in node.iter(include_text=True):  # type: ignore[attr-defined]
            tag = child.tag
            if tag == "-text":
                text = child.text_content
                if text and (parts or not text.isspace()):
                    parts.append(text)
                    if self.link_depth:
                        n = len(text.strip())
                        self.part_links += n
                        self.part_cta += n if self.href_kind & 1 else 0
                        self.part_off += n if self.href_kind & 2 else 0
            elif tag in blocks.SKIP:
                if tag in CONTROLS and self.open >= 0 and \
                        (child.attributes.get("type") or "").lower() != "hidden":
                    self.controls[self.open] = self.controls.get(self.open, 0) + 1
                continue
            elif tag == "br":
                parts.append("\n")
            elif depth >= blocks.MAX_DEPTH:
                parts.append(child.text(deep=True, separator=" "))
            elif tag in blocks.BLOCK:
                self.block(child, tag, depth + 1)
            elif tag == "a":
                was = self.href_kind
                href = (child.attributes.get("href") or "").strip()
                kind = 1 if CTA_HREF.search(href) else 0
                if href.startswith(("http:", "https:", "//")) and CtaWalk.site and site_of(href) != CtaWalk.site:
                    kind |= 2
                self.href_kind = kind
                self.link_depth += 1
                self.walk(child, depth + 1)
                self.link_depth -= 1
                self.href_kind = was
            else:
                self.walk(child, depth + 1)


def page_site(html: str, url: str | None) -> str:
    """The page's site: its URL's, else its canonical link's or ``og:url``'s."""
    if url:
        return site_of(url)
    from selectolax.lexbor import LexborHTMLParser

    parser = LexborHTMLParser(html)
    for selector, attr in (('link[rel="canonical"]', "href"), ('meta[property="og:url"]', "content")):
        node = parser.css_first(selector)
        if node is not None and node.attributes.get(attr):
            return site_of(node.attributes[attr])
    return ""


def cta_columns(html: str, url: str | None, table: blocks.BlockTable, x: np.ndarray) -> np.ndarray | None:
    """(blocks, len(CTA_NAMES)) for one page, or None when the extended walk cuts other blocks."""
    CtaWalk.site = page_site(html, url)
    CtaWalk.made = []
    blocks._Walk = CtaWalk  # the module's walk, extended, for this call
    try:
        again = blocks.page_blocks(html, compiled=False)
    finally:
        blocks._Walk = ORIGINAL_WALK
    walk = next((w for w in reversed(CtaWalk.made) if len(w.texts) == len(again)
                 and w.el_parent == again.el_parent.tolist()), None)
    n = len(table)
    if walk is None or len(again) != n or again.texts != table.texts:
        return None
    el_parent = again.el_parent
    totals = np.zeros(len(el_parent))
    for e, c in walk.controls.items():
        totals[e] += c
    for e in range(len(el_parent) - 1, -1, -1):  # children come after their container
        if el_parent[e] >= 0:
            totals[el_parent[e]] += totals[e]
    parent = again.parent
    grand = np.where(parent >= 0, el_parent[np.maximum(parent, 0)], -1) if len(el_parent) else parent
    ctrl_parent = np.where(parent >= 0, totals[np.maximum(parent, 0)], 0.0) if len(totals) else np.zeros(n)
    ctrl_grand = np.where(grand >= 0, totals[np.maximum(grand, 0)], 0.0) if len(totals) else np.zeros(n)
    chars = np.maximum(np.expm1(x[:, _LOG_CHARS].astype(np.float64)), 1.0)
    cta = np.minimum(np.asarray(walk.cta, dtype=np.float64), chars)
    off = np.minimum(np.asarray(walk.off, dtype=np.float64), chars)
    cc = np.concatenate([[0.0], np.cumsum(chars)])
    ct = np.concatenate([[0.0], np.cumsum(cta)])
    lo, hi = np.maximum(np.arange(n) - 2, 0), np.minimum(np.arange(n) + 3, n)
    return np.column_stack([np.log1p(ctrl_parent), np.log1p(ctrl_grand), cta / chars, off / chars,
                            (ct[hi] - ct[lo]) / (cc[hi] - cc[lo])]).astype(np.float32)


ORIGINAL_WALK = blocks._Walk


def with_columns(records: list[bt.PageRecord], gold: Path) -> dict[int, np.ndarray]:
    """Each record's rows with the new columns (zeros where the walk disagreed)."""
    at = {(r.set, r.id): i for i, r in enumerate(records)}
    sources = {"wcxb": gold / "wcxb", "trafilatura": gold / "trafilatura", "utomo": gold / "utomo",
               "googletrends": gold / "googletrends", "scrapinghub": find_shared_dir() / "eval"}
    out: dict[int, np.ndarray] = {}
    differ = 0
    for name, path in sources.items():
        for page in LOADERS[name](path):
            i = at.get((page.set, page.id))
            if i is None:
                continue
            rec = records[i]
            cols = cta_columns(decode(page.body), page.url, rec.table, rec.x)
            if cols is None:
                differ += 1
                cols = np.zeros((len(rec.x), len(CTA_NAMES)), dtype=np.float32)
            out[i] = np.hstack([rec.x, cols])
    missing = [i for i in range(len(records)) if i not in out]
    print(f"{len(out)} pages re-walked, {differ} cut other blocks (zeros), {len(missing)} not found", flush=True)
    for i in missing:
        out[i] = np.hstack([records[i].x, np.zeros((len(records[i].x), len(CTA_NAMES)), dtype=np.float32)])
    return out


def main(cache: Path, gold: Path) -> None:
    records = [r for r in bt.load_records(cache) if r.set.split("-")[0] != "fundus"]
    base = [i for i, name in enumerate(NAMES) if name not in PROSE_PARENT_NAMES]  # the rows of the first look
    for r in records:
        r.x = r.x[:, base]
    augmented = with_columns(records, gold)
    new = np.concatenate([augmented[i][:, -len(CTA_NAMES):] for i in range(len(records))])
    print("share of blocks with each column non-zero:",
          ", ".join(f"{n} {np.mean(new[:, j] > 0):.3f}" for j, n in enumerate(CTA_NAMES)), flush=True)
    compare(records, augmented)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
