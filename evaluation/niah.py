"""A synthetic needle-in-a-haystack task (RULER's ``niah_single`` shape) for long context.

The context-lengthening stage (SPEC 3, report App. D) is judged on retrieval at long
range. RULER's data loaders need downloads (essays) and a Hugging Face tokenizer; this
generator needs neither: a haystack of repeated filler sentences (RULER's "noise"
haystack), one needle ``"One of the special magic numbers for {key} is: {value}."``
inserted at a chosen depth, and the question RULER asks. Contexts are sized in *model
tokens* with the afm tokenizer, on a grid of lengths x depths, and the answer is right
when the 7-digit value appears in the greedy continuation.

Items are deterministic for a seed, so two checkpoints see the same haystacks.
"""

from __future__ import annotations

import random
from typing import Any

FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. "
          "There and back again. ")
NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUESTION = ("\nWhat is the special magic number for {key} mentioned in the provided text? "
            "The special magic number for {key} mentioned in the provided text is")
_WORDS = ("amber", "basil", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "iris",
          "juniper", "krill", "lagoon", "meadow", "nectar", "onyx", "pebble", "quartz", "raven",
          "saffron", "tundra", "umber", "violet", "willow", "yarrow", "zephyr")
MAX_GEN = 12


def _haystack(n: int) -> list[str]:
    sentences = [x.strip() + "." for x in FILLER.split(".") if x.strip()]
    return [sentences[i % len(sentences)] for i in range(n)]


def _prompt(n_fill: int, depth: float, needle: str, question: str) -> str:
    hay = _haystack(n_fill)
    at = round(n_fill * depth)
    return " ".join(hay[:at] + [needle] + hay[at:]) + question


def make_items(encode: Any, lengths: list[int], depths: list[float], per_cell: int = 2,
               seed: int = 0) -> list[dict[str, Any]]:
    """Items ``{input, answer, length, depth, tokens}``; ``encode(text) -> token ids``
    sizes them. The haystack is whole filler sentences, the needle goes between two of
    them after ``depth`` of the haystack, and ``tokens`` (the prompt's real token count)
    is at most ``length``."""
    rng = random.Random(seed)
    sentence_ids = max(1, len(encode(FILLER)) // len(_haystack(5)))
    items = []
    for length in lengths:
        for depth in depths:
            for _ in range(per_cell):
                key = f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}"
                value = str(rng.randrange(1_000_000, 10_000_000))
                needle = NEEDLE.format(key=key, value=value)
                question = QUESTION.format(key=key)
                budget = length - len(encode(needle)) - len(encode(question)) - 2
                n_fill = max(0, budget // sentence_ids)
                prompt = _prompt(n_fill, depth, needle, question)
                while n_fill > 0 and len(encode(prompt)) > length:  # merges across sentences
                    n_fill -= 1
                    prompt = _prompt(n_fill, depth, needle, question)
                items.append({"input": prompt, "answer": value, "length": length, "depth": depth,
                              "tokens": len(encode(prompt))})
    return items


def niah_match(references: list[str], predictions: list[str], **_: Any) -> float:
    """1.0 when the needle's value appears in the continuation."""
    return 1.0 if references[0] in predictions[0] else 0.0


def default_lengths(max_length: int) -> list[int]:
    """Up to four context lengths ending at the model's window (minus room to answer)."""
    top = max_length - MAX_GEN - 1
    lengths = sorted({max(64, top // 8), max(64, top // 4), max(64, top // 2), top})
    return [n for n in lengths if n <= top]


def niah_config(tokenizer: Any, max_length: int, *, lengths: list[int] | None = None,
                depths: list[float] | None = None, per_cell: int = 2, seed: int = 0) -> dict[str, Any]:
    """The lm-eval task config ``afm_niah`` (generated items, generate_until)."""
    if tokenizer is None:
        raise ValueError("afm_niah needs the model's tokenizer to size its contexts")
    lengths = lengths or default_lengths(max_length)
    depths = depths or [0.0, 0.25, 0.5, 0.75, 1.0]
    items = make_items(tokenizer.encode, lengths, depths, per_cell, seed)

    def dataset(**_: Any) -> Any:
        import datasets

        return datasets.DatasetDict({"test": datasets.Dataset.from_list(items)})

    return {
        "task": "afm_niah",
        "custom_dataset": dataset,
        "output_type": "generate_until",
        "test_split": "test",
        "doc_to_text": "{{input}}",
        "doc_to_target": "{{answer}}",
        "target_delimiter": " ",
        "generation_kwargs": {"until": ["\n"], "max_gen_toks": MAX_GEN, "do_sample": False},
        "metric_list": [{"metric": niah_match, "aggregation": "mean", "higher_is_better": True}],
        "num_fewshot": 0,
        "metadata": {"version": 1.0, "lengths": lengths, "depths": depths, "per_cell": per_cell},
    }


def grid_from_samples(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy per (length, depth) from lm-eval's logged samples, for the heatmap."""
    cells: dict[tuple[int, float], list[float]] = {}
    for s in samples:
        doc = s["doc"]
        score = next((v for k, v in s.items() if k.startswith("niah_match")), None)
        if score is None:
            continue
        cells.setdefault((int(doc["length"]), float(doc["depth"])), []).append(float(score))
    lengths = sorted({k[0] for k in cells})
    depths = sorted({k[1] for k in cells})
    acc = [[sum(cells.get((n, d), [0.0])) / max(1, len(cells.get((n, d), []))) for d in depths]
           for n in lengths]
    return {"lengths": lengths, "depths": depths, "accuracy": acc}
