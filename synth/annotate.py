"""Labels from a judge: a strong model scores a sample of documents against a written
rubric, the first step of FineWeb-Edu's recipe (annotate a sample with an LLM -> train a
small fast classifier on the annotations -> filter the corpus with the classifier).

The rubric is a YAML file (:func:`load_rubric`): the prompt with a ``{document}``
placeholder, the score scale, the pattern that finds the score in the judge's answer, and
the score from which a document counts as positive for a binary classifier. The judge is
any generator of :mod:`afm.synth.generators` (an OpenAI-compatible endpoint, a local afm
checkpoint, or ``module:factory``), always behind the response cache, so an interrupted
run resumes and a refused request costs only its own label.

Every label keeps the judge's raw answer: a score that was parsed wrongly, or a rubric
the judge misread, can be checked and re-parsed without asking the judge again.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from afm.errors import UserError
from afm.sampling import reservoir_sample
from afm.synth.generators import GenerationError, GenerationRequest, Generator

RUBRICS = ("educational_value",)  # shipped in data/rubrics/, usable by name


class RubricError(UserError):
    """A rubric file that cannot be used (missing fields, no placeholder, a bad pattern)."""


@dataclass(frozen=True)
class Rubric:
    """How the judge is asked, and how its answer becomes a score."""

    name: str
    prompt: str  # with one {document} placeholder
    answer_pattern: str  # a regex whose first group is the score; the last match counts
    min_score: int
    max_score: int
    positive_from: int  # score >= this: the positive class of a binary classifier
    system: str | None = None
    max_document_chars: int = 6000  # the document is cut to this before it is sent
    max_tokens: int = 512  # the judge's answer budget
    source: str = ""  # where the rubric file was read from

    def request(self, text: str, seed: int = 0) -> GenerationRequest:
        """The judge's request for one document (greedy: the same document, the same
        answer)."""
        doc = text[: self.max_document_chars]
        messages = ([{"role": "system", "content": self.system}] if self.system else [])
        messages.append({"role": "user", "content": self.prompt.replace("{document}", doc)})
        return GenerationRequest(messages=tuple(messages), temperature=0.0, max_tokens=self.max_tokens,
                                 seed=seed, tag=f"annotate:{self.name}")

    def parse(self, answer: str) -> int | None:
        """The score in ``answer`` (the last match of the pattern), or None when there is
        none or it is off the scale."""
        found = re.findall(self.answer_pattern, answer or "")
        if not found:
            return None
        last = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
        try:
            value = int(float(last))
        except ValueError:
            return None
        return value if self.min_score <= value <= self.max_score else None


def rubric_path(name_or_path: str) -> Path:
    """A shipped rubric by name (``educational_value``) or a file path."""
    if name_or_path in RUBRICS:
        return Path(str(resources.files("afm.synth").joinpath(f"data/rubrics/{name_or_path}.yaml")))
    path = Path(name_or_path)
    if not path.is_file():
        raise RubricError(f"rubric {name_or_path!r}: no such file (shipped rubrics: {', '.join(RUBRICS)})")
    return path


def load_rubric(name_or_path: str) -> Rubric:
    """Read and check a rubric file (see :class:`Rubric` for its fields)."""
    import yaml

    path = rubric_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RubricError(f"{path}: unreadable rubric ({exc})") from exc
    if not isinstance(data, dict):
        raise RubricError(f"{path}: a rubric is a mapping")
    missing = [k for k in ("name", "prompt", "answer_pattern", "scale", "positive_from") if k not in data]
    if missing:
        raise RubricError(f"{path}: missing {', '.join(missing)}")
    scale = data["scale"]
    if not (isinstance(scale, dict) and isinstance(scale.get("min"), int) and isinstance(scale.get("max"), int)
            and scale["min"] < scale["max"]):
        raise RubricError(f"{path}: scale must be {{min: INT, max: INT}} with min < max")
    if str(data["prompt"]).count("{document}") != 1:
        raise RubricError(f"{path}: the prompt must hold the {{document}} placeholder exactly once")
    try:
        pattern = re.compile(str(data["answer_pattern"]))
    except re.error as exc:
        raise RubricError(f"{path}: answer_pattern is no regular expression ({exc})") from exc
    if pattern.groups < 1:
        raise RubricError(f"{path}: answer_pattern needs a group that captures the score")
    positive = data["positive_from"]
    if not isinstance(positive, int) or not scale["min"] < positive <= scale["max"]:
        raise RubricError(f"{path}: positive_from must be a whole score above {scale['min']} "
                          f"and at most {scale['max']}")
    known = {"name", "prompt", "answer_pattern", "scale", "positive_from", "system", "max_document_chars",
             "max_tokens", "description", "cites"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise RubricError(f"{path}: unknown keys {unknown}")
    for key in ("max_document_chars", "max_tokens"):
        if key in data and (not isinstance(data[key], int) or data[key] < 1):
            raise RubricError(f"{path}: {key} must be a positive whole number")
    return Rubric(name=str(data["name"]), prompt=str(data["prompt"]), answer_pattern=str(data["answer_pattern"]),
                  min_score=scale["min"], max_score=scale["max"], positive_from=positive,
                  system=data.get("system"), max_document_chars=int(data.get("max_document_chars", 6000)),
                  max_tokens=int(data.get("max_tokens", 512)), source=str(path))


@dataclass
class Annotation:
    """One judged document, as written to the labels file."""

    id: str
    text: str
    score: int | None  # None: the answer held no score on the scale, or the judge refused
    label: str | None  # "pos" / "neg" by the rubric's positive_from; None without a score
    raw: str | None  # the judge's whole answer
    finish: str | None  # why the answer ended (stop / length)
    error: str | None = None  # the refusal, when the judge refused the request


def annotate(docs: Sequence[tuple[str, str]], judge: Generator, rubric: Rubric, *,
             positive_from: int | None = None, seed: int = 0, chunk: int = 256,
             progress: Callable[[int], None] | None = None) -> list[Annotation]:
    """Judge every ``(id, text)`` of ``docs`` with ``rubric``; one :class:`Annotation`
    each, in order. Requests go out in chunks of ``chunk`` (the generator keeps its own
    concurrency inside one); when the judge refuses a request, the unanswered requests of
    that chunk are retried one by one (answered ones come back from the cache) and the
    refused one ends as an annotation with its ``error``: a refusal costs one label, not
    the run."""
    cut = rubric.positive_from if positive_from is None else positive_from
    requests = [rubric.request(text, seed) for _, text in docs]
    answers: list[Any] = [None] * len(docs)
    errors: dict[int, str] = {}
    for lo in range(0, len(requests), max(1, chunk)):
        part = range(lo, min(lo + max(1, chunk), len(requests)))

        def done(j: int, gen: Any, lo: int = lo) -> None:
            answers[lo + j] = gen
            if progress:
                progress(1)

        try:
            judge.generate([requests[i] for i in part], on_result=done)
        except GenerationError:
            for i in part:
                if answers[i] is not None:
                    continue
                try:
                    answers[i] = judge.generate([requests[i]])[0]
                except GenerationError as exc:
                    errors[i] = str(exc)[:500]
                if progress:
                    progress(1)
    out = []
    for i, (doc_id, text) in enumerate(docs):
        gen = answers[i]
        raw = gen.texts[0] if gen is not None and gen.texts else None
        score = rubric.parse(raw) if raw is not None else None
        label = None if score is None else ("pos" if score >= cut else "neg")
        finish = gen.finish[0] if gen is not None and gen.finish else None
        out.append(Annotation(doc_id, text, score, label, raw, finish, errors.get(i)))
    return out


def write_labels(path: str | Path, annotations: Iterable[Annotation], *, judge: str, rubric: Rubric,
                 positive_from: int | None = None) -> dict[str, Any]:
    """The labels file (JSON lines, one :class:`Annotation` a line plus the judge and the
    rubric) and its summary: counts per score, labels, unparsed answers, refusals."""
    cut = rubric.positive_from if positive_from is None else positive_from
    scores: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    unparsed = refused = n = 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for a in annotations:
            n += 1
            fh.write(json.dumps({**asdict(a), "judge": judge, "rubric": rubric.name, "positive_from": cut},
                                ensure_ascii=False) + "\n")
            if a.error:
                refused += 1
            elif a.score is None:
                unparsed += 1
            else:
                scores[str(a.score)] += 1
                labels[str(a.label)] += 1
    tmp.replace(path)
    return {"documents": n, "scores": dict(sorted(scores.items())), "labels": dict(labels),
            "unparsed": unparsed, "refused": refused, "positive_from": cut, "labels_file": str(path)}


def sample_documents(records: Iterable[dict[str, Any]], size: int, *, seed: int = 0,
                     text_field: str = "text") -> list[tuple[str, str]]:
    """A uniform sample of ``size`` ``(id, text)`` pairs (reservoir sampling: one pass,
    bounded memory). Records without an ``id`` are named by their position."""
    if size < 1:
        raise UserError(f"sample size must be >= 1, got {size}")
    texts = ((str(rec.get("id") or f"#{n}"), rec.get(text_field)) for n, rec in enumerate(records))
    return reservoir_sample(((i, t) for i, t in texts if isinstance(t, str) and t.strip()), size, seed)[0]


__all__ = ["RUBRICS", "Annotation", "Rubric", "RubricError", "annotate", "load_rubric", "rubric_path",
           "sample_documents", "write_labels"]
