"""The curate benchmark's generated pages: the default corpus stays as it was (its cached
copies and quoted figures depend on it), and the one-language option gives each page
paragraphs of its own template's language, English templates in the share asked for."""

from __future__ import annotations

import hashlib
import html
from pathlib import Path

import pytest

from afm.app.bench.pipelines.webcorpus import (
    Template,
    generate_pages,
    load_templates,
    template_languages,
)

# sha1 of the first 300 default pages joined: the corpus every quoted curate figure ran on.
DEFAULT_300 = "b3d16f870d86dac6f2af40111ccaf757c70d48d7"


def _paragraphs(t: Template, body: bytes) -> list[str]:
    """The texts put into ``t``'s slots to make ``body``."""
    out, pos = [], len(t.parts[0])
    for part in t.parts[1:]:
        end = body.index(part, pos)
        out.append(html.unescape(body[pos:end].decode("utf-8")))
        pos = end + len(part)
    return out


def test_default_pages_unchanged(shared_eval: Path) -> None:
    pages = generate_pages(shared_eval / "extraction", 300)
    assert hashlib.sha1(b"".join(body for _, body in pages)).hexdigest() == DEFAULT_300


def test_one_language_pages_keep_their_templates_language(shared_eval: Path) -> None:
    extraction = shared_eval / "extraction"
    templates, _ = load_templates(extraction)
    languages = template_languages(templates)
    pools: dict[str, set[str]] = {}
    for t, lang in zip(templates, languages, strict=True):
        pools.setdefault(lang, set()).update(t.paragraphs)
    by_host = {hashlib.sha1(t.url.encode()).hexdigest()[:6]: (t, lang)
               for t, lang in zip(templates, languages, strict=True)}
    pages = generate_pages(extraction, 400, english_share=0.45)
    assert len(pages) == 400
    new = [(by_host[url.split("//site", 1)[1][:6]], body) for url, body in pages if "//site" in url]
    for (t, lang), body in new:
        assert set(_paragraphs(t, body)) <= pools[lang]
    english = sum(lang == "en" for (_, lang), _ in new) / len(new)
    assert 0.35 < english < 0.55
    assert {lang for (_, lang), _ in new} - {"en"}  # other languages are there too


def test_english_share_is_checked(shared_eval: Path) -> None:
    with pytest.raises(ValueError, match="english_share"):
        generate_pages(shared_eval / "extraction", 10, english_share=1.5)
