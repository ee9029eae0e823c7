"""The bundled demo site carries every problem the curate pipeline must handle."""

from __future__ import annotations

from afm.app.demosite import render_site, seed_paths


def test_site_has_the_planted_problems():
    site = render_site()
    assert {"news", "blog", "forum", "rant", "school", "intl"} <= set(site)
    assert "Disallow: /private/" in site["news"]["/robots.txt"]["body"]
    assert "/private/drafts" in site["news"]  # exists, but robots.txt forbids it
    assert "@" in site["forum"]["/members"]["body"]
    assert 'lang="fr"' in site["intl"]["/"]["body"]
    tides = site["news"]["/science/tides"]["body"]
    copy = site["blog"]["/2024/tides-copy"]["body"]
    assert tides != copy and "Bay of Fundy" in copy
    for host, path in seed_paths():
        assert path in site[host]
