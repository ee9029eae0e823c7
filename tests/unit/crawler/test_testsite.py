"""The local test site: hosts on loopback addresses, the request log, host links rewritten."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from afm.crawler.testsite import LocalSites, Page


def test_local_sites_hosts_log_and_rewrite():
    sites = {
        "one": {"/": Page('<a href="{{host:two}}/x">two</a>'),
                "/gen/*": lambda path, headers: Page(f"generated {path}")},
        "two": {"/x": Page(b"bytes", headers={"Content-Type": "text/plain"}, status=201)},
    }
    with LocalSites(sites) as site:
        assert site.base_url("one") != site.base_url("two")
        assert site.base_url("one").startswith("http://127.0.0.10:")
        body = urllib.request.urlopen(site.url("one", "/")).read().decode()
        assert site.base_url("two") + "/x" in body
        resp = urllib.request.urlopen(site.url("two", "/x"))
        assert resp.status == 201 and resp.read() == b"bytes"
        assert urllib.request.urlopen(site.url("one", "/gen/a/b")).read() == b"generated /gen/a/b"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(site.url("one", "/missing"))
        assert err.value.code == 404
        assert [(h, p) for h, p, _ in site.requests] == [
            ("one", "/"), ("two", "/x"), ("one", "/gen/a/b"), ("one", "/missing")]
