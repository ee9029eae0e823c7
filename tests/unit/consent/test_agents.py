"""The preset:ai-training list: data with a source per entry, updated from the
ai.robots.txt project's robots.json format without code, never losing an agent."""

from __future__ import annotations

import json

from click.testing import CliRunner

from afm.app.commands.crawler.crawl import robots_group
from afm.consent.agents import (
    PRESETS,
    agents_from_robots_json,
    is_training_function,
    load_agents,
    merge_agents,
    token_of,
)
from afm.consent.robots import rules_from_fetch
from afm.consent.training import ConsentSettings


def test_every_entry_says_where_it_comes_from():
    data = load_agents()
    assert data["upstream"]["project"] == "ai.robots.txt" and data["upstream"]["commit"]
    for entry in data["agents"]:
        assert entry["token"] and entry["source"] and entry["use"], entry


def test_preset_covers_the_sources_training_and_dataset_crawlers():
    preset = {t.lower() for t in PRESETS["ai-training"]}
    for token in ("GPTBot", "CCBot", "Google-Extended", "Applebot-Extended", "ClaudeBot",
                  "Brightbot", "FriendlyCrawler", "VelenPublicWebCrawler", "ISSCyberRiskCrawler",
                  "AI2Bot", "img2dataset", "Timpibot", "DeepSeekBot"):
        assert token.lower() in preset, token
    for token in ("OAI-SearchBot", "ChatGPT-User", "PerplexityBot", "Claude-User"):
        assert token.lower() not in preset, token  # search and user-triggered fetchers


def test_function_rule():
    for text in ("LLM/AI training.", "Scrapes data to train machine learning models.",
                 "We are using the data from the crawler to build datasets for machine learning "
                 "experiments.", "Scrapes data for business data sets and machine learning models.",
                 "AI Data Scrapers", "Provides open crawl dataset"):
        assert is_training_function(text), text
    for text in ("AI Assistants", "Search result generation.", "AI Search Crawlers",
                 "Takes action based on user prompts."):
        assert not is_training_function(text), text
    assert token_of("Brightbot 1.0") == "Brightbot"
    assert token_of("iaskspider/2.0") == "iaskspider"


def test_preset_tokens_find_the_groups_publishers_write():
    """``User-agent: Brightbot 1.0`` (product token Brightbot), ``User-agent: AI2Bot`` (a
    name with a digit) are honoured through the preset."""
    policy = ConsentSettings(training_agents=["preset:ai-training"]).training_policy("afmbot")
    for line in ("Brightbot 1.0", "AI2Bot", "img2dataset", "FriendlyCrawler"):
        rules = rules_from_fetch(200, f"User-agent: {line}\nDisallow: /\n".encode())
        assert policy.decide("https://e.example/a", robots=rules).optout, line


def test_update_only_adds(tmp_path):
    upstream = {"NewTrainBot": {"operator": "[X](https://x.example)",
                                "function": "Scrapes data to train models."},
                "HelperBot": {"operator": "Y", "function": "AI Assistants"},
                "GPTBot": {"operator": "OpenAI", "function": "Search result generation."}}
    found = agents_from_robots_json(upstream, "test")
    assert [e["token"] for e in found] == ["NewTrainBot"] and found[0]["operator"] == "X"
    merged, added = merge_agents(load_agents()["agents"], found)
    assert [e["token"] for e in added] == ["NewTrainBot"]
    assert {e["token"] for e in load_agents()["agents"]} <= {e["token"] for e in merged}
    # the command: --write to another file, no code change
    src = tmp_path / "robots.json"
    src.write_text(json.dumps(upstream))
    out = tmp_path / "agents.json"
    result = CliRunner().invoke(robots_group, ["agents", "--from", str(src), "--write",
                                               "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = load_agents(out)
    assert len(written["agents"]) == len(load_agents()["agents"]) + 1
    assert "GPTBot" in {e["token"] for e in written["agents"]}  # its new function removes nothing
