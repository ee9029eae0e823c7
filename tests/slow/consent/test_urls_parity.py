"""Parity of the one origin normalisation (afm.consent.urls) with ada, the WHATWG URL
Standard's reference-grade parser (Node.js's): random hosts built from labels that
exercise every branch of host parsing (IDNA mapping and Punycode, case, percent-encoding,
IPv4 number forms, bidi and joiner labels, trailing dots, default and invalid ports).
The stored expected values of ``make test`` are the standard's own examples
(tests/unit/consent/test_conformance.py)."""

from __future__ import annotations

import random

import pytest

from afm.consent.urls import HostError, parse_origin

ada_url = pytest.importorskip("ada_url", reason="ada-url is the reference extra: "
                              "pip install -e '.[reference]' -c constraints.txt")

pytestmark = pytest.mark.slow

LABELS = ["example", "EXAMPLE", "bücher", "BÜCHER", "faß", "xn--bcher-kva", "xn--fa-hia", "例子",
          "测试", "mañana", "ÉCOLE", "a-b", "_x", "0x7f", "127", "1", "0", "09", "0x", "255", "256",
          "\ufb01", "\u01c5", "\u2177", "a\u200cb", "١٢٣", "مثال", "ｅｘａｍｐｌｅ", "%41", "%2e",
          "com", "org", ""]


def _ada(url: str) -> str | None:
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        return None
    host = parsed.hostname
    if host.endswith(".") and len(host) > 1:  # afm's one choice: one trailing dot dropped
        host = host[:-1]
    return f"{parsed.protocol[:-1]}://{host}" + (f":{parsed.port}" if parsed.port else "")


def test_origins_match_ada_on_random_hosts():
    rnd = random.Random(52)
    wrong = []
    for _ in range(20_000):
        host = ".".join(rnd.choice(LABELS) for _ in range(rnd.randint(1, 4)))
        if rnd.random() < 0.1:
            host += "."
        port = rnd.choice(["", ":80", ":443", ":0443", ":8080", ":65536"])
        url = f"{rnd.choice(['http', 'https'])}://{host}{port}/p"
        try:
            mine = parse_origin(url).serialize()
        except HostError:
            mine = None
        if mine != _ada(url):
            wrong.append((url, mine, _ada(url)))
    assert not wrong, wrong[:5]
