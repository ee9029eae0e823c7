"""Math tag / symbol / domain / classifier filter and Math Q&A extraction."""

from __future__ import annotations

import pytest

from afm.filters.base import apply_filter
from afm.filters.math import (
    MathConfig,
    MathFilter,
    domain_match,
    extract_math_qa,
    load_symbols,
    load_tags,
    symbol_hits,
    tag_hits,
)
from afm.schema import make_document


def test_shipped_lists_have_the_reports_sizes():
    assert len(load_tags()) == 40
    latex, uni = load_symbols()
    assert len(latex) + len(uni) == 350
    assert "\\frac" in latex and "∑" in uni


def test_tag_hits_case_insensitive():
    html = '<script src="https://cdn.jsdelivr.net/npm/MathJax@3/es5/tex-mml-chtml.js"></script>'
    assert set(tag_hits(html)) == {"mathjax", "tex-mml-chtml"}
    assert tag_hits("A plain page about cooking.") == []


def test_symbol_hits_latex_commands_need_a_word_boundary():
    # \alpha, \in, ∑ and ≤ count; \alphabet and \inline are not symbols
    assert symbol_hits(r"\alpha \alphabet x \in S \inline ∑ a ≤ b") == ["\\alpha", "\\in", "∑", "≤"]


def test_domain_match_includes_subdomains():
    domains = frozenset({"mathoverflow.net"})
    assert domain_match("https://mathoverflow.net/q/1", domains)
    assert domain_match("https://www.mathoverflow.net/q/1", domains)
    assert not domain_match("https://notmathoverflow.net/", domains)
    assert not domain_match(None, domains)


MATH_TEXT = r"Let $x \in \mathbb{R}$. Then $\sum_i x_i^2 \geq 0$ and $\frac{a}{b} \leq 1$ when a ≤ b."
PLAIN_TEXT = "The bakery opens at nine and sells bread, cakes and coffee to the neighbourhood."


def test_web_documents_are_kept_with_signals():
    d = MathFilter()(make_document(PLAIN_TEXT))
    assert d.keep
    assert d.signals["math_is_math"] == 0.0 and d.signals["math_symbol_hits"] == 0.0
    d = MathFilter()(make_document(MATH_TEXT))
    assert d.keep and d.signals["math_is_math"] == 1.0
    # \in \mathbb \sum \geq \frac \leq ≤ -> 7 hits, 7 distinct; tags: "\frac{"
    assert d.signals["math_symbol_hits"] == 7.0
    assert d.signals["math_tag_hits"] == 1.0


def test_require_math_drops_pages_without_evidence():
    flt = MathFilter(MathConfig(require_math=True))
    kept, rej = apply_filter(flt, make_document(PLAIN_TEXT))
    assert kept is None and rej["reason"] == "math_no_evidence"
    assert rej["signals"]["math.math_symbol_hits"] == 0.0
    kept, rej = apply_filter(flt, make_document(MATH_TEXT))
    assert rej is None


def test_html_tag_hits_recorded_at_extraction_count():
    from afm.filters.math import HTML_TAG_SIGNAL

    doc = make_document(PLAIN_TEXT, signals={HTML_TAG_SIGNAL: 3.0})
    d = MathFilter(MathConfig(require_math=True))(doc)
    assert d.keep and d.signals["math_tag_hits"] == 3.0


def test_domain_list_admits_pages(tmp_path):
    f = tmp_path / "domains.txt"
    f.write_text("# human-labelled\nmathforum.example\n")
    flt = MathFilter(MathConfig(require_math=True, domains_file=str(f)))
    d = flt(make_document(PLAIN_TEXT, url="https://mathforum.example/t/1"))
    assert d.keep and d.signals["math_domain"] == 1.0


def test_symbol_thresholds_are_config():
    text = "a ≤ b ≤ c ≤ d ≤ e ≤ f"  # 5 hits but one distinct symbol
    assert MathFilter()(make_document(text)).signals["math_is_math"] == 0.0
    cfg = MathConfig(min_distinct_symbols=1)
    assert MathFilter(cfg)(make_document(text)).signals["math_is_math"] == 1.0


def test_math_quality_classifier(tmp_path):
    pytest.importorskip("fasttext")
    from afm.filters.classifier import train_classifier

    pos = [f"we prove that the sum of {i} squares is non negative using the lemma and an inequality"
           for i in range(40)]
    neg = [f"math homework help cheap buy now click here for {i} answers free download"
           for i in range(40)]
    model = tmp_path / "mathq.bin"
    train_classifier(pos, neg, model, epoch=20, verbose=False)
    flt = MathFilter(MathConfig(require_math=True, quality_model_path=str(model),
                                min_distinct_symbols=1, min_symbol_hits=1))
    good = flt(make_document("We prove the lemma: the sum of squares is non negative, x ≥ 0."))
    bad = flt(make_document("Cheap math homework help, click here, buy now: x ≥ 0."))
    assert good.keep and good.signals["math_quality"] > 0.5
    assert not bad.keep and bad.reason == "math_quality"


def test_shipped_math_quality_model():
    pytest.importorskip("fasttext")
    from afm.filters.math import MATH_QUALITY_MODEL

    flt = MathFilter(MathConfig(require_math=True, quality_model_path=str(MATH_QUALITY_MODEL)))
    good = flt(make_document(r"For every $\varepsilon > 0$ there is $\delta > 0$ such that "
                             r"$|f(x) - f(a)| < \varepsilon$ whenever $|x - a| < \delta$; this is "
                             r"what it means for $f$ to be continuous at $a$: $\lim_{x \to a} f(x) = f(a)$."))
    spam = flt(make_document("FREE algebra worksheets printable answer key grade 5 ∑ √ π ≤ ≥ ∞ "
                             "homework help do my homework A+ guaranteed $15 per page"))
    assert good.keep and good.signals["math_quality"] > 0.5
    assert not spam.keep and spam.reason == "math_quality"


SE_PAGE = """<html><body>
<div id="question-header"><h1><a class="question-hyperlink">Why is $x^2 \\geq 0$?</a></h1></div>
<div id="question"><div class="s-prose js-post-body"><p>For real $x$, why is the square
non-negative?</p></div></div>
<div class="answer" data-score="3"><div class="s-prose"><p>Low voted answer text here.</p></div></div>
<div class="answer accepted-answer" data-score="1"><div class="s-prose">
<p>Either $x \\geq 0$ or $x &lt; 0$; in both cases the product of equal signs is positive.</p>
</div></div></body></html>"""

MICRODATA_PAGE = """<html><body><div itemscope itemtype="https://schema.org/QAPage">
<div itemprop="mainEntity" itemscope itemtype="https://schema.org/Question">
<h1 itemprop="name">Derivative of sine</h1>
<div itemprop="text">What is <script type="math/tex">\\frac{d}{dx}\\sin x</script>?</div>
<div itemprop="suggestedAnswer" itemscope itemtype="https://schema.org/Answer">
<meta itemprop="upvoteCount" content="10"><div itemprop="text">It is cosine of x, always.</div></div>
<div itemprop="acceptedAnswer" itemscope itemtype="https://schema.org/Answer">
<meta itemprop="upvoteCount" content="2"><div itemprop="text">The derivative is
<span class="katex"><span class="katex-mathml"><math><semantics><mi>c</mi><annotation \
encoding="application/x-tex">\\cos x</annotation></semantics></math></span><span \
class="katex-html">cos x rendered</span></span>.</div></div>
</div></div></body></html>"""


def test_extract_math_qa_stackexchange_prefers_accepted_answer():
    pairs = extract_math_qa(SE_PAGE)
    assert len(pairs) == 1
    assert pairs[0]["question"].startswith("Why is $x^2 \\geq 0$?")
    assert "For real $x$" in pairs[0]["question"]
    assert pairs[0]["answer"].startswith("Either $x \\geq 0$ or $x < 0$")
    assert len(extract_math_qa(SE_PAGE, max_answers=2)) == 2


def test_extract_math_qa_microdata_keeps_latex():
    pairs = extract_math_qa(MICRODATA_PAGE)
    assert pairs == [{
        "question": "Derivative of sine\n\nWhat is $\\frac{d}{dx}\\sin x$?",
        "answer": "The derivative is $\\cos x$.",
    }]


def test_extract_math_qa_non_qa_pages():
    assert extract_math_qa("<html><body><p>Just an article.</p></body></html>") == []
    assert extract_math_qa("") == []
