"""Training tokens as a set: the robots.txt product tokens whose rules decide training use,
and the named presets that expand to the AI-training tokens publishers actually write.

A publisher who does not want to be trained on rarely names ``afmbot-extended``: they
write ``User-agent: GPTBot`` / ``CCBot`` / ``Google-Extended`` / ``Applebot-Extended`` /
``ClaudeBot`` ... ``Disallow: /`` (Cloudflare's managed robots.txt writes eight such
groups on millions of domains). A curator who wants to honour "whatever the publisher
said to any AI crawler" names the preset ``preset:ai-training`` in ``training_agents``;
any one of the listed tokens whose group disallows a URL opts it out, and the evidence
names the token.

**The list is data**, ``ai_training_agents.json`` beside this module, each entry with
where it comes from:

* ``ai.robots.txt`` - the ai.robots.txt project's ``robots.json`` (its ``function``
  field, as the file's header records: commit and date), every agent whose function is
  AI training or building / selling data sets (:func:`is_training_function`: training,
  data sets, LLMs, machine learning, AI models, AI research, data sold, and the categories
  "AI Data Scrapers" and "AI Data Providers"). Search, answer-engine, assistant and agent fetchers are not
  training crawlers and are not listed;
* ``operator`` - the operator's own crawler documentation, where robots.json's function
  text does not say training but the operator does (``Applebot-Extended``, ``Amazonbot``);
* ``afm`` - this project's own token.

**Updating it needs no code change**: ``afm robots agents --from robots.json --write``
reads a newer ``robots.json`` (the upstream file format: ``{name: {operator, function,
...}}``), adds every AI-training agent it lists that the file lacks, and writes the data
file. An update only adds: an agent that leaves the upstream list stays (a publisher's
group for it still says what it said), so an opt-out is never lost to an update.

Names that are no RFC 9309 product token (``Brightbot 1.0``, ``Datenbank Crawler``) are
listed as the token a robots.txt parser reads from them (``Brightbot``); names with
digits or dots (``AI2Bot``, ``img2dataset``) are kept whole, and the parser keeps such a
name beside its product token (:mod:`afm.consent.robots`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from afm.errors import UserError

OWN_TRAINING_TOKEN = "afmbot-extended"
PRESET_PREFIX = "preset:"
DATA_FILE = Path(__file__).with_name("ai_training_agents.json")
UPSTREAM = "ai.robots.txt"

#: A robots.json ``function`` (or category) that says AI training or data sets.
TRAINING_FUNCTION = re.compile(
    r"\btrain|\bdata ?sets?\b|\bllms?\b|machine learning|\bai models?\b|ai data scrapers?"
    r"|ai data providers?|ai llm scraper|ai research|data is sold", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_-][A-Za-z0-9_.-]*")


class AgentError(UserError):
    """A training token that is not a product token, an unknown preset, or an agents file
    that cannot be read."""


def is_training_function(function: str) -> bool:
    """Whether a robots.json ``function`` names AI training or a data-set use."""
    return bool(TRAINING_FUNCTION.search(function or ""))


def token_of(name: str) -> str:
    """The robots.txt token of an upstream agent name: the name up to the first character
    that cannot be in one (``Brightbot 1.0`` -> ``Brightbot``); '' for none."""
    match = _NAME.match(name.strip())
    return match.group(0).rstrip(".") if match else ""


def load_agents(path: str | Path = DATA_FILE) -> dict[str, Any]:
    """The agents data file: ``{"upstream": {...}, "agents": [{token, operator, use,
    source}, ...]}``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentError(f"training agents file {path}: cannot be read ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        raise AgentError(f"training agents file {path}: no \"agents\" list")
    return data


def agents_from_robots_json(robots_json: dict[str, Any], where: str) -> list[dict[str, str]]:
    """The AI-training agents of an ai.robots.txt ``robots.json`` (its format: name ->
    ``{operator, function, ...}``), as data-file entries whose source is ``where``."""
    if not isinstance(robots_json, dict):
        raise AgentError("robots.json: expected an object of agent name -> description")
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for name, info in robots_json.items():
        info = info if isinstance(info, dict) else {}
        function = str(info.get("function") or "")
        token = token_of(str(name))
        if not token or token.lower() in seen or not is_training_function(function):
            continue
        seen.add(token.lower())
        operator = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", str(info.get("operator") or ""))
        out.append({"token": token, "operator": operator.strip(), "use": function.strip(),
                    "source": where, "name": str(name)})
    return out


def merge_agents(current: list[dict[str, str]], found: list[dict[str, str]]
                 ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``current`` plus the entries of ``found`` whose token it lacks (case-blind), and
    those added. Nothing is removed (see the module docstring)."""
    have = {e["token"].lower() for e in current}
    added = [e for e in found if e["token"].lower() not in have]
    return [*current, *added], added


def _tokens(data: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in data["agents"]:
        token = entry.get("token", "")
        if token and token.lower() not in {t.lower() for t in out}:
            out[token] = f"{entry.get('operator', '')}: {entry.get('use', '')} [{entry.get('source', '')}]"
    return out


#: token -> operator, what the fetched content is used for, and where that is said.
AI_TRAINING_TOKENS: dict[str, str] = _tokens(load_agents())

PRESETS: dict[str, tuple[str, ...]] = {
    # every AI-training token above: "honour whatever the publisher said to any AI crawler"
    "ai-training": tuple(AI_TRAINING_TOKENS),
    # afm's own token only (the default)
    "afm": (OWN_TRAINING_TOKEN,),
}


def _valid_token(token: str) -> bool:
    return bool(token) and all(c.isascii() and (c.isalpha() or c in "_-") for c in token)


def expand_agents(entries: Iterable[str]) -> tuple[str, ...]:
    """The training tokens ``entries`` name: product tokens (RFC 9309 2.2.1,
    ``[A-Za-z_-]+``) and ``preset:NAME`` entries, expanded, de-duplicated without case,
    in order. Raises :class:`AgentError` for anything else."""
    out: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        entry = str(entry).strip()
        if not entry:
            continue
        if entry.lower().startswith(PRESET_PREFIX):
            name = entry[len(PRESET_PREFIX):].strip().lower()
            if name not in PRESETS:
                raise AgentError(f"training_agents: unknown preset {entry!r}; known: "
                                 + ", ".join(PRESET_PREFIX + p for p in PRESETS))
            tokens: Iterable[str] = PRESETS[name]
        elif _valid_token(entry):
            tokens = (entry,)
        else:
            raise AgentError(f"training_agents: {entry!r} is not a robots.txt product token "
                             "([A-Za-z_-]+, RFC 9309 2.2.1) nor a preset ("
                             + ", ".join(PRESET_PREFIX + p for p in PRESETS) + ")")
        for token in tokens:
            if token.lower() not in seen:
                seen.add(token.lower())
                out.append(token)
    return tuple(out)


__all__ = ["AI_TRAINING_TOKENS", "DATA_FILE", "OWN_TRAINING_TOKEN", "PRESETS", "PRESET_PREFIX",
           "TRAINING_FUNCTION", "AgentError", "agents_from_robots_json", "expand_agents",
           "is_training_function", "load_agents", "merge_agents", "token_of"]
