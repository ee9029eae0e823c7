"""Usage preferences: what a publisher says about *use* after access, in the two
vocabularies of 2025-2026, read the same way by the crawler and by curate.

**IETF AI preferences** (``Content-Usage``): a statement is an RFC 9651 structured-field
Dictionary of category labels and the tokens ``y`` / ``n`` (draft-ietf-aipref-vocab-07,
2026-08, section 6; attached to content by draft-ietf-aipref-attach-05, 2026-08: the
``Content-Usage`` HTTP response field, section 2, and the ``Content-Usage`` robots.txt
rule, section 3). Parsing follows the vocabulary exactly: a statement that is not a valid
Dictionary (an upper-case key, spaces around ``=``) states nothing; a value other than the
token ``y`` / ``n`` is unknown; a repeated key keeps its last value (RFC 9651 4.2.2).
Which labels decide *training a generative language model*, read twice:

* **as vocab-07 reads it**: its AI Training label ``train-ai`` (every more specific
  training use sits under it in the hierarchy) and nothing else; a key the vocabulary
  does not define is ignored (section 6), so ``train-genai`` means nothing to -07;
* **as the earlier drafts read it**, which publishers deployed while they were current:
  the most specific label stated decides ("check the more general category", vocab-02
  to -06)::

      train-genai (vocab-02, -03)  genai (vocab-01)  train-ai (vocab-02 .. -07)
      ai (vocab-01)  bots (vocab-03, -04: all automated processing)
      all (vocab-02: all automated processing)  tdm (vocab-01: text and data mining)

and **the more restrictive of the two readings wins** (vocab-07 section 5.1: a ``n``
that applies is not outweighed by a ``y``). So an earlier draft's label never loosens a
-07 statement: ``train-ai=n, train-genai=y`` disallows (-07 ignores ``train-genai``);
``train-ai=y, train-genai=n`` disallows too (a -03 reader is told no for exactly our
use); ``train-ai=y, bots=n`` allows (-07 ignores ``bots``; to -04 the more specific
``train-ai`` decides).

**Cloudflare Content Signals** (``Content-Signal``): ``key=value`` pairs separated by
commas, values ``yes`` / ``no`` (``y`` / ``n`` read alike); ``ai-train`` is training (contentsignals.org, CC0,
2025-09-24; Cloudflare's managed robots.txt writes ``Content-signal: search=yes,
ai-train=no`` in its ``User-Agent: *`` group). Cloudflare also sends it as an HTTP
response field. Keys and values are read without case, spaces allowed; a key given twice
with different values is read as the more restrictive one.

Several statements about one asset (robots.txt and header, several matching rules)
combine as vocab-07 section 5.1 says: any disallow wins, then any allow, else unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

ALLOW, DISALLOW, UNKNOWN = "allow", "disallow", "unknown"
CONTENT_USAGE, CONTENT_SIGNAL = "content-usage", "content-signal"
#: vocab-07's training label.
AIPREF_TRAINING_LABEL = "train-ai"
#: The earlier drafts' labels that apply to training, most specific first (see above).
LEGACY_TRAINING_LABELS = ("train-genai", "genai", "train-ai", "ai", "bots", "all", "tdm")
AIPREF_TRAINING_LABELS = (AIPREF_TRAINING_LABEL, *LEGACY_TRAINING_LABELS[:2],
                          *LEGACY_TRAINING_LABELS[3:])
#: Content Signals key for training.
SIGNAL_TRAINING_KEY = "ai-train"


@dataclass(frozen=True)
class Preference:
    """The outcome for training (``allow`` / ``disallow`` / ``unknown``) and the label
    or key that decided it."""

    value: str = UNKNOWN
    label: str = ""

    @property
    def disallowed(self) -> bool:
        return self.value == DISALLOW


def combine(prefs: Iterable[Preference]) -> Preference:
    """vocab-07 section 5.1: any disallow wins, then any allow, else unknown."""
    prefs = list(prefs)
    for wanted in (DISALLOW, ALLOW):
        for pref in prefs:
            if pref.value == wanted:
                return pref
    return Preference()


def aipref_statement(value: str | bytes) -> dict[str, str]:
    """A Content-Usage statement as ``{label: "y" | "n"}`` (only token values); ``{}``
    when it is not a valid RFC 9651 Dictionary."""
    from http_sf import StructuredFieldError, Token, parse

    raw = value.encode("utf-8") if isinstance(value, str) else value
    try:
        parsed = parse(raw.strip(b" \t"), tltype="dictionary")
    except (StructuredFieldError, ValueError, UnicodeError, TypeError):
        return {}
    out: dict[str, str] = {}
    for key, member in parsed.items():
        item = member[0] if isinstance(member, tuple) else member
        if isinstance(item, Token) and str(item) in ("y", "n"):
            out[key] = str(item)
    return out


@functools.lru_cache(maxsize=4096)
def aipref_training(value: str | bytes) -> Preference:
    """What a Content-Usage statement says about training: the more restrictive of
    vocab-07's reading and the earlier drafts' (see the module docstring)."""
    statement = aipref_statement(value)
    readings = []
    if AIPREF_TRAINING_LABEL in statement:  # vocab-07
        readings.append(Preference(ALLOW if statement[AIPREF_TRAINING_LABEL] == "y"
                                   else DISALLOW, AIPREF_TRAINING_LABEL))
    for label in LEGACY_TRAINING_LABELS:  # the earlier drafts: the most specific decides
        if label in statement:
            readings.append(Preference(ALLOW if statement[label] == "y" else DISALLOW, label))
            break
    return combine(readings)


def signal_statement(value: str) -> dict[str, str]:
    """A Content-Signal line as ``{key: "yes" | "no"}``; a key given twice with different
    values keeps ``no``."""
    out: dict[str, str] = {}
    for member in value.replace(";", ",").split(","):
        key, sep, val = member.partition("=")
        key, val = key.strip(" \t\"'").lower(), val.strip(" \t\"'").lower()
        val = {"y": "yes", "n": "no"}.get(val, val)  # the aipref spelling, read alike
        if not sep or not key or val not in ("yes", "no"):
            continue
        out[key] = "no" if "no" in (val, out.get(key)) else val
    return out


@functools.lru_cache(maxsize=4096)
def signal_training(value: str) -> Preference:
    """What a Content-Signal value says about training (``ai-train``)."""
    statement = signal_statement(value)
    if SIGNAL_TRAINING_KEY in statement:
        return Preference(ALLOW if statement[SIGNAL_TRAINING_KEY] == "yes" else DISALLOW,
                          SIGNAL_TRAINING_KEY)
    return Preference()


def training(kind: str, value: str) -> Preference:
    """The training preference of one statement of ``kind`` (content-usage / -signal)."""
    return aipref_training(value) if kind == CONTENT_USAGE else signal_training(value)


def split_rule(value: str) -> tuple[str | None, str]:
    """draft-ietf-aipref-attach-05 section 3.2: a rule value starting with ``/`` is a path
    (up to the first space or tab) then the statement; otherwise all of it is the
    statement. Content-Signal lines are read the same way."""
    value = value.strip(" \t")
    if value.startswith("/"):
        for i, ch in enumerate(value):
            if ch in " \t":
                return value[:i], value[i:].strip(" \t")
        return value, ""
    return None, value


__all__ = ["AIPREF_TRAINING_LABEL", "AIPREF_TRAINING_LABELS", "LEGACY_TRAINING_LABELS", "ALLOW", "CONTENT_SIGNAL", "CONTENT_USAGE", "DISALLOW",
           "SIGNAL_TRAINING_KEY", "UNKNOWN", "Preference", "aipref_statement", "aipref_training",
           "combine", "signal_statement", "signal_training", "split_rule", "training"]
