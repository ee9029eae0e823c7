"""Real text for the pruning/distillation ablation, as JSONL documents for `afm curate`.

Sources (all offline): the 181 gold article bodies of the extraction benchmark
(``../shared/eval/extraction/ground-truth.json``: news and feature articles, scrapinghub's
article-extraction-benchmark, MIT), the 79 topics of the Python reference manual that
ship with CPython (``pydoc_data.topics``), and the docstrings of the CPython standard
library (one document per module: its module, class and function docstrings of 300+
characters, modules with 1,000+ characters; tests and IDLE left out), both technical
English prose written by people (PSF licence). Each document goes to
``heldout`` when the first byte of sha1(id) is below 26 (about 10%), else ``train``, so
the split is fixed and independent of the order of the sources.

Usage: python experiments/on-device-ablation/make_corpus.py ../shared/eval/extraction/ground-truth.json OUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def documents(ground_truth: Path):
    for key, item in sorted(json.loads(ground_truth.read_text()).items()):
        text = (item.get("articleBody") or "").strip()
        if text:
            yield {"id": f"article-{key}", "url": item.get("url", ""), "source": "web", "text": text}
    import pydoc_data.topics

    for name, text in sorted(pydoc_data.topics.topics.items()):
        yield {"id": f"pydoc-{name}", "url": f"python-docs:{name}", "source": "web", "text": text.strip()}
    yield from stdlib_docstrings()


def stdlib_docstrings():
    import ast
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("test/", "idlelib/", "site-packages/")) or "/test" in rel:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        parts = [d for node in ast.walk(tree)
                 if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                 and (d := ast.get_docstring(node)) and len(d) >= 300]
        text = "\n\n".join(parts)
        if len(text) >= 1000:
            yield {"id": f"stdlib-{rel}", "url": f"python-stdlib:{rel}", "source": "web", "text": text}


def main(ground_truth: str, out: str) -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {"train": 0, "heldout": 0}
    with open(out_dir / "train.jsonl", "w") as train, open(out_dir / "heldout.jsonl", "w") as heldout:
        for doc in documents(Path(ground_truth)):
            split = "heldout" if hashlib.sha1(doc["id"].encode()).digest()[0] < 26 else "train"
            (heldout if split == "heldout" else train).write(json.dumps(doc) + "\n")
            counts[split] += 1
    print(json.dumps(counts))


if __name__ == "__main__":
    main(*sys.argv[1:3])
