"""Training tokens as a set: the robots.txt product tokens whose rules decide training use,
and the named presets that expand to the AI-training tokens publishers actually write.

A publisher who does not want to be trained on rarely names ``afmbot-extended``: they
write ``User-agent: GPTBot`` / ``CCBot`` / ``Google-Extended`` / ``Applebot-Extended`` /
``ClaudeBot`` ... ``Disallow: /`` (Cloudflare's managed robots.txt writes eight such
groups on millions of domains). A curator who wants to honour "whatever the publisher
said to any AI crawler" names the preset ``preset:ai-training`` in ``training_agents``;
any one of the listed tokens whose group disallows a URL opts it out, and the evidence
names the token.

The preset lists crawlers whose operators document that what they fetch trains AI models
(or builds a corpus published for that use, CCBot). Sources: each operator's crawler
page, as collected by the ai.robots.txt project (``robots.json``, commit 738c80d,
2026-08-22, its ``function`` field), read 2026. Search, answer-engine and user-triggered
fetchers (``OAI-SearchBot``, ``PerplexityBot``, ``ChatGPT-User``, ``Claude-User``) are
not training crawlers and are not listed; nor are image-only scrapers (the corpus is text).
"""

from __future__ import annotations

from collections.abc import Iterable

from afm.errors import UserError

OWN_TRAINING_TOKEN = "afmbot-extended"
PRESET_PREFIX = "preset:"

#: token -> operator and what its documentation says the fetched content is used for.
AI_TRAINING_TOKENS: dict[str, str] = {
    "afmbot-extended": "afm: this project's own training token",
    "Applebot-Extended": "Apple: training Apple's foundation models",
    "GPTBot": "OpenAI: training OpenAI's generative AI models",
    "Google-Extended": "Google: training Gemini models (a robots.txt token only)",
    "ClaudeBot": "Anthropic: training Anthropic's models",
    "anthropic-ai": "Anthropic: training (earlier token)",
    "Claude-Web": "Anthropic: earlier web crawler token",
    "CCBot": "Common Crawl: the open crawl corpus used to train most open models",
    "meta-externalagent": "Meta: training AI models and improving products",
    "FacebookBot": "Meta: training language models (earlier token)",
    "Bytespider": "ByteDance: LLM training",
    "TikTokSpider": "ByteDance: LLM training",
    "Amazonbot": "Amazon: improving services, including training Amazon's AI models",
    "cohere-training-data-crawler": "Cohere: downloading training data",
    "AI2Bot": "Ai2: training open language models",
    "Ai2Bot-Dolma": "Ai2: the Dolma training corpus",
    "DeepSeekBot": "DeepSeek: training language models",
    "PanguBot": "Huawei: training the PanGu models",
    "YandexAdditional": "Yandex: data for the YandexGPT models",
    "YandexAdditionalBot": "Yandex: data for the YandexGPT models",
    "Webzio-Extended": "Webz.io: AI-training use of its crawl data",
    "Timpibot": "Timpi: training LLMs",
    "ICC-Crawler": "NICT: training AI models",
    "Cotoyogi": "ROIS: training Japanese LLMs",
    "SBIntuitionsBot": "SB Intuitions: AI development",
    "Factset_spyderbot": "FactSet: AI model training",
}

PRESETS: dict[str, tuple[str, ...]] = {
    # every AI-training token above: "honour whatever the publisher said to any AI crawler"
    "ai-training": tuple(AI_TRAINING_TOKENS),
    # afm's own token only (the default)
    "afm": (OWN_TRAINING_TOKEN,),
}


class AgentError(UserError):
    """A training token that is not a product token, or an unknown preset."""


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


__all__ = ["AI_TRAINING_TOKENS", "OWN_TRAINING_TOKEN", "PRESETS", "PRESET_PREFIX",
           "AgentError", "expand_agents"]
