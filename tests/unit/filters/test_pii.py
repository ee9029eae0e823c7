"""PII: typed placeholders for real personal data, tricky look-alikes left alone."""

from __future__ import annotations

import pytest

from afm.filters.pii import (
    PiiConfig,
    PiiDetector,
    PiiFilter,
    card_prefix_ok,
    iban_ok,
    luhn_ok,
)
from afm.schema import make_document


@pytest.fixture(scope="module")
def flt() -> PiiFilter:
    return PiiFilter()


@pytest.mark.parametrize(
    ("text", "kind", "placeholder"),
    [
        ("Write to jane.doe+news@gmail.com today.", "email", "<EMAIL>"),
        ("Mail J.Smith@mail.co.uk for details.", "email", "<EMAIL>"),
        ("Call (415) 555-2671 after 5pm.", "phone", "<PHONE>"),
        ("Phone: 212-736-5000.", "phone", "<PHONE>"),
        ("Our London office: +44 20 7946 0958.", "phone", "<PHONE>"),
        ("Ring 020 7946 0958 for the desk.", "phone", "<PHONE>"),
        ("Login from 8.8.8.8 was blocked.", "ip", "<IP>"),
        ("Resolver 2001:4860:4860::8888 answered.", "ip", "<IP>"),
        ("Card 4111 1111 1111 1111 was charged.", "card", "<CARD>"),
        ("Amex 3782-822463-10005 on file.", "card", "<CARD>"),
        ("Pay to GB82 WEST 1234 5698 7654 32 please.", "iban", "<IBAN>"),
        ("IBAN DE89370400440532013000.", "iban", "<IBAN>"),
        ("SSN 123-45-6789 on the form.", "ssn", "<SSN>"),
        ("Send it to 42 Main Street, Springfield, IL 62701 by Friday.", "address", "<ADDRESS>"),
        ("Visit 1600 Pennsylvania Avenue NW, Washington, DC 20500 on tour.", "address", "<ADDRESS>"),
    ],
)
def test_positives_replaced_with_typed_placeholder(flt, text, kind, placeholder):
    d = flt(make_document(text))
    assert d.keep
    assert d.document["pii_redactions"] == {kind: 1}
    assert placeholder in d.document["text"]


@pytest.mark.parametrize(
    "text",
    [
        "Upgrade to version 1.2.3.4 today, or v10.0.0.1 for the beta.",
        "Release 2.4.6 fixed the bug; see build 4.1.0.12.",
        "The meeting is on 2019-11-18 at 12:30:45, or 18/11/2019.",
        "ISBN 978-3-16-148410-0 and ISBN-13: 9780306406157.",
        "It costs $1,299.99, or 1.299,99 EUR, up 12.5% from 2018.",
        "Mail user@example.com or admin@test.example.org, or someone@foo.test.",
        "Icons: logo@2x.png and sprite@3x.webp.",
        "Private hosts 192.168.1.1, 10.0.0.7, 127.0.0.1 and docs range 192.0.2.44, 2001:db8::1.",
        "Card number 4111 1111 1111 1112 fails the checksum.",
        "Tracking number 1234567890123456 and order 9780306406157.",
        "Not an IBAN: GB82WEST12345698765433 (bad checksum).",
        "Never-issued SSNs 000-12-3456, 666-12-3456 and 900-12-3456.",
        "Fictional number 555-0100 from the films.",
        "The population was 8,336,817 in 2019; area 783.8 km2.",
        "He lives on Main Street in a small town.",
        "Coordinates 40.7128, -74.0060; time 12:30; ratio 3:2:1.",
    ],
)
def test_tricky_negatives_are_left_alone(flt, text):
    d = flt(make_document(text))
    assert d.keep
    assert d.document["pii_redactions"] == {}, d.document["text"]
    assert d.document["text"] == text


def test_counts_per_kind_and_text_around_kept(flt):
    text = ("Contact: ann@corp.io, bob@corp.io. Call (415) 555-2671. "
            "Server 8.8.4.4 logged it. Version 1.2.3.4 is current.")
    d = flt(make_document(text))
    assert d.document["pii_redactions"] == {"email": 2, "phone": 1, "ip": 1}
    assert d.document["text"] == ("Contact: <EMAIL>, <EMAIL>. Call <PHONE>. "
                                  "Server <IP> logged it. Version 1.2.3.4 is current.")
    assert d.signals["items"] == 4.0


def test_directory_page_is_dropped_as_mostly_pii(flt):
    rows = [f"Name {i}: person{i}@mailbox.org, (415) 555-{2600 + i:04d}" for i in range(30)]
    d = flt(make_document("\n".join(rows)))
    assert not d.keep and d.reason == "mostly_pii"
    assert d.document["pii_redactions"]["email"] == 30
    assert "@mailbox.org" not in d.document["text"]  # the reject record holds redacted text


def test_one_contact_line_in_an_article_is_not_mostly_pii(flt):
    article = "The museum reopens in March after a two-year renovation of its galleries. " * 10
    d = flt(make_document(article + "Press contact: press@museum.org"))
    assert d.keep and d.document["pii_redactions"] == {"email": 1}


def test_config_kinds_placeholder_and_empty(flt):
    only_email = PiiFilter(PiiConfig(kinds=["email"], placeholder="[{kind}]"))
    d = only_email(make_document("a@b.io and (415) 555-2671"))
    assert d.document["text"] == "[email] and (415) 555-2671"
    with pytest.raises(ValueError, match="unknown PII kinds"):
        PiiFilter(PiiConfig(kinds=["dna"]))
    d = flt(make_document(""))
    assert d.keep and d.document["pii_redactions"] == {}


def test_overlaps_resolved_by_priority():
    spans = PiiDetector().find("IBAN DE89370400440532013000 and mail x.y@mailbox.org")
    assert [s.kind for s in spans] == ["iban", "email"]


def test_validators():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert card_prefix_ok("4111111111111111") and not card_prefix_ok("9780306406157")
    assert iban_ok("GB82 WEST 1234 5698 7654 32") and not iban_ok("GB82 WEST 1234 5698 7654 33")
    assert not iban_ok("ZZ82WEST12345698765432")


def test_long_text_is_bounded_but_kept():
    flt = PiiFilter(PiiConfig(max_chars=100))
    text = "x" * 150 + " mail a.b@mailbox.org"
    d = flt(make_document(text))
    assert d.document["text"] == text  # beyond max_chars: passed through untouched
