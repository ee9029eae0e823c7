"""The benchmark registry: named sets of texts that training data must not contain.

A benchmark is read from a local JSONL / JSON / Parquet / CSV file (optionally gzipped) or,
only when explicitly allowed, from a Hugging Face dataset id. Which fields hold text is a
small per-benchmark *field mapping*: dotted paths into each row, where lists are expanded
(``question.choices.text`` takes every choice of an ARC row). Adapters are named mappings
for the common public formats, so a directory of benchmark files needs no configuration;
anything else is described in a YAML file::

    benchmarks:
      - name: gsm8k
        path: gsm8k-test.jsonl.gz        # relative to the YAML file
        adapter: gsm8k
      - name: my-eval
        path: prompts.csv
        fields: [prompt, reference]
        id_field: uid
        n: 8                             # override the automatic n

The project ships no third-party benchmark data: only its own small ``demo-math`` set
(``filters/data/benchmarks/``).

Each text field of an example is a separate *segment*: n-grams never span two fields (a
question followed by its choices is not a sentence anybody writes). The n of a benchmark
is clamp(5th percentile of example length in tokens, 4, 13): long enough that a shared
n-gram means copying, short enough that 95% of examples yield n-grams.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from afm.config import from_dict, read_yaml
from afm.console import track
from afm.filters.ngram_index import MAX_N, MIN_N, IndexWriter, hash_tokens
from afm.parquet import open_parquet

DATA_DIR = Path(__file__).resolve().parent / "data" / "benchmarks"
CONFIG_NAMES = ("benchmarks.yaml", "benchmarks.yml")
_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet", ".csv", ".csv.gz")


@dataclass(frozen=True)
class Adapter:
    """Where the text of a public benchmark format lives (dotted paths; first id found).

    ``joined``: pairs of fields whose values are joined with a space into one text, for
    layouts that split one sentence in two (WinoGrande's context + continuation); every
    value of the first field is joined with every value of the second."""

    fields: tuple[str, ...]
    id_fields: tuple[str, ...] = ()
    csv_header: bool = True
    note: str = ""
    joined: tuple[tuple[str, str], ...] = ()


# Field names follow each benchmark's original release and its common Hugging Face copy;
# a path that a row lacks is simply skipped, so one adapter covers both layouts.
ADAPTERS: dict[str, Adapter] = {
    "gsm8k": Adapter(("question", "answer"), note="openai/grade-school-math jsonl"),
    "humaneval": Adapter(("prompt", "canonical_solution"), ("task_id",), note="openai/human-eval"),
    "mmlu": Adapter(("question", "choices"), note="cais/mmlu rows"),
    "mmlu-csv": Adapter(
        ("0", "1", "2", "3", "4"), csv_header=False, note="hendrycks/test CSV: question,A,B,C,D,answer"
    ),
    "arc": Adapter(
        ("question.stem", "question.choices.text", "question", "choices.text"),
        ("id",),
        note="allenai ARC jsonl (question.stem) and ai2_arc rows (question, choices.text)",
    ),
    "hellaswag": Adapter(("ctx", "endings"), ("ind",), note="rowanz/hellaswag jsonl"),
    "piqa": Adapter(("goal", "sol1", "sol2"), ("id",), note="ybisk/piqa jsonl"),
    "winogrande": Adapter(("sentence", "option1", "option2"), ("qID",), note="allenai/winogrande"),
    "triviaqa": Adapter(
        ("question", "answer.value", "Question", "Answer.Value"),
        ("question_id", "QuestionId"),
        note="trivia_qa rows and the original JSON's Data entries",
    ),
    "math": Adapter(("problem", "solution"), ("unique_id",), note="hendrycks/math, MATH-500"),
    "ifeval": Adapter(("prompt",), ("key",), note="google IFEval input_data.jsonl"),
    # Harness-reformatted layouts (llm-foundry local_data, see ../shared/eval/SOURCES.md).
    "query-choices": Adapter(("query", "choices"), note="llm-foundry multiple choice "
                             "(ARC, BoolQ): query + choices"),
    "winogrande-cont": Adapter(("continuation",), joined=(("context_options", "continuation"),),
                               note="llm-foundry WinoGrande: each filled context + continuation"),
    "lambada": Adapter(("text",), note="LAMBADA (OpenAI): the whole passage"),
    "openbookqa": Adapter(("Question Stem", "Choices", "question_stem", "choices.text"),
                          ("ID", "id"), note="AllenAI OpenBookQA tsv columns / HF rows"),
    "triviaqa-context": Adapter(("context", "answer"), note="llm-foundry TriviaQA: question "
                                "context + answer"),
}

# The files of ../shared/eval/benchmarks (listed in its SOURCES.md), by file stem:
# (benchmark name, adapter). A directory holding them needs no benchmarks.yaml.
KNOWN_FILES: dict[str, tuple[str, str]] = {
    "arc_challenge-test": ("arc_challenge", "query-choices"),
    "arc_easy-test": ("arc_easy", "query-choices"),
    "boolq-validation": ("boolq", "query-choices"),
    "gsm8k-test": ("gsm8k", "gsm8k"),
    "humaneval": ("humaneval", "humaneval"),
    "ifeval-input_data": ("ifeval", "ifeval"),
    "lambada_openai-test": ("lambada_openai", "lambada"),
    "math-test": ("math", "math"),
    "math500-test": ("math500", "math"),
    "mmlu-dev": ("mmlu_dev", "mmlu"),
    "mmlu-test": ("mmlu", "mmlu"),
    "openbookqa-test": ("openbookqa", "openbookqa"),
    "piqa-validation": ("piqa", "piqa"),
    "triviaqa-sm_sub-first2000": ("triviaqa", "triviaqa-context"),
    "winogrande-dev": ("winogrande", "winogrande-cont"),
}

# Named sets of benchmarks (by name) a user can index in one command (--suite).
# "report": what the AFM report evaluates its models on, Tables 2-4 and Section 6
# (MMLU, GSM8K, ARC-Challenge, HellaSwag, WinoGrande, OpenBookQA, MATH, IFEval,
# HumanEval). HellaSwag is in the set but not in ../shared (see its SOURCES.md): building
# the suite from there names it as missing. "all": every benchmark found.
SUITES: dict[str, tuple[str, ...]] = {
    "report": ("mmlu", "mmlu_dev", "gsm8k", "arc_challenge", "hellaswag", "winogrande",
               "openbookqa", "math", "math500", "ifeval", "humaneval"),
}


@dataclass
class BenchmarkSpec:
    """One benchmark: a name, where to read it, and which fields hold its text."""

    name: str
    path: str | None = None  # local file (jsonl[.gz], json[.gz], parquet, csv[.gz])
    adapter: str | None = None  # a key of ADAPTERS; None = guess from name and first rows
    fields: list[str] = field(default_factory=list)  # explicit mapping (overrides adapter)
    id_field: str | None = None
    n: int | None = None  # override clamp(p5 length, 4, 13)
    format: str = "auto"  # auto | jsonl | json | parquet | csv
    csv_header: bool | None = None
    max_examples: int | None = None
    hf_dataset: str | None = None  # read with `datasets` only when allow_hf=True
    hf_config: str | None = None
    hf_split: str = "test"


@dataclass
class Benchmark:
    """A loaded benchmark: example ids and their text segments."""

    name: str
    example_ids: list[str]
    segments: list[tuple[int, str]]  # (example number, text)
    adapter: str
    source: str
    rows_without_text: int = 0  # rows where the mapping found no text (reported, not indexed)

    def example_lengths(self) -> np.ndarray:
        """Tokens per example (all its segments)."""
        lengths = np.zeros(len(self.example_ids), dtype=np.int64)
        for lo in range(0, len(self.segments), 4096):
            part = self.segments[lo : lo + 4096]
            counts = hash_tokens([t for _, t in part]).doc_token_counts()
            np.add.at(lengths, [e for e, _ in part], counts)
        return lengths


def choose_n(lengths: np.ndarray | list[int], override: int | None = None) -> int:
    """clamp(5th-percentile example length in tokens, 4, 13), or ``override`` (checked)."""
    if override is not None:
        if not MIN_N <= override <= MAX_N:
            raise ValueError(f"n={override} outside {MIN_N}..{MAX_N}")
        return int(override)
    arr = np.asarray(lengths)
    if arr.size == 0:
        return MAX_N
    p5 = int(np.floor(np.percentile(arr, 5)))
    return int(min(max(p5, MIN_N), MAX_N))


# ----------------------------------------------------------------------------- reading


def _resolve(row: Any, path: str) -> list[str]:
    """Strings at dotted ``path`` of ``row``; lists met on the way are expanded."""
    values: list[Any] = [row]
    for key in path.split("."):
        nxt: list[Any] = []
        for v in values:
            if isinstance(v, list):
                v_items = v
            else:
                v_items = [v]
            for item in v_items:
                if isinstance(item, dict) and key in item:
                    nxt.append(item[key])
        values = nxt
    out: list[str] = []
    for v in values:
        items = v if isinstance(v, list) else [v]
        out.extend(s for s in items if isinstance(s, str) and s.strip())
    return out


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")  # type: ignore[return-value]
    return open(path, encoding="utf-8", newline="")  # noqa: SIM115 - caller closes


def _detect_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    for fmt in ("jsonl", "json", "parquet", "csv"):
        if name.endswith("." + fmt):
            return fmt
    raise ValueError(f"{path}: cannot tell the format (expected one of {_SUFFIXES})")


def iter_rows(path: Path, fmt: str = "auto", csv_header: bool = True) -> Iterator[Any]:
    """Rows of a local benchmark file as dicts (CSV without header: keys "0", "1", ...)."""
    fmt = _detect_format(path) if fmt == "auto" else fmt
    if fmt == "jsonl":
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
    elif fmt == "json":
        with _open_text(path) as fh:
            data = json.load(fh)
        if isinstance(data, dict):  # e.g. TriviaQA's {"Data": [...]}
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise ValueError(f"{path}: JSON object must hold exactly one list of rows")
            data = lists[0]
        if not isinstance(data, list):
            raise ValueError(f"{path}: JSON must be a list of rows")
        yield from data
    elif fmt == "parquet":
        for batch in open_parquet(path).iter_batches(batch_size=4096):
            yield from batch.to_pylist()
    elif fmt == "csv":
        with _open_text(path) as fh:
            if csv_header:
                yield from csv.DictReader(fh)
            else:
                for values in csv.reader(fh):
                    yield {str(i): v for i, v in enumerate(values)}
    else:
        raise ValueError(f"{path}: unknown format {fmt!r}")


def _iter_hf(spec: BenchmarkSpec) -> Iterator[Any]:
    """Rows of a Hugging Face dataset (needs the optional `datasets` package and network)."""
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError(
            f"{spec.name}: hf_dataset={spec.hf_dataset!r} needs the `datasets` package "
            "(pip install datasets) and network access; or download the file and give `path`"
        ) from exc
    ds = datasets.load_dataset(spec.hf_dataset, spec.hf_config, split=spec.hf_split)
    yield from ds


def _name_tokens(name: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", name.lower()))


def guess_adapter(name: str, rows: list[Any], rows_no_header: list[Any] | None = None) -> str:
    """The adapter for a benchmark file: one named like the file if it finds text in the
    first rows, else the one that finds the most text fields there. ``rows_no_header``
    (CSV files only) are the same rows read without a header line, for header-less formats."""

    def score(key: str) -> int:
        adapter = ADAPTERS[key]
        sample = rows if adapter.csv_header else (rows_no_header or [])
        return max((sum(1 for f in adapter.fields if _resolve(r, f)) for r in sample), default=0)

    tokens = _name_tokens(name)
    named = [k for k in ADAPTERS if k.split("-")[0] in tokens]
    named.sort(key=lambda k: (rows_no_header is None) == k.endswith("-csv"))  # csv first for csv
    for key in named:
        if score(key) > 0:
            return key
    best = max(ADAPTERS, key=score)
    if score(best) == 0:
        keys = sorted(rows[0]) if rows and isinstance(rows[0], dict) else []
        raise ValueError(
            f"benchmark {name!r}: no adapter finds text in its rows (keys {keys}); "
            "describe it in a benchmarks.yaml with `fields:`"
        )
    return best


def load_benchmark(spec: BenchmarkSpec, allow_hf: bool = False) -> Benchmark:
    """Read one benchmark's examples into text segments."""
    if spec.path:
        path = Path(spec.path)
        if not path.exists():
            raise FileNotFoundError(f"benchmark {spec.name!r}: file not found: {path}")
        fmt = _detect_format(path) if spec.format == "auto" else spec.format
        adapter_name = spec.adapter
        if adapter_name is None and not spec.fields:
            probe = _head(path, fmt, True if spec.csv_header is None else spec.csv_header)
            probe_nh = _head(path, fmt, False) if fmt == "csv" and spec.csv_header is None else None
            adapter_name = guess_adapter(spec.name, probe, probe_nh)
        source = str(path)
    elif spec.hf_dataset:
        if not allow_hf:
            raise RuntimeError(
                f"benchmark {spec.name!r} names hf_dataset={spec.hf_dataset!r}; reading from "
                "the Hugging Face hub is off (pass allow_hf=True / --allow-hf)"
            )
        fmt = "hf"
        adapter_name = spec.adapter
        source = f"hf:{spec.hf_dataset}/{spec.hf_config or ''}:{spec.hf_split}"
    else:
        raise ValueError(f"benchmark {spec.name!r}: give `path` or `hf_dataset`")

    if adapter_name is not None and adapter_name not in ADAPTERS:
        raise ValueError(f"benchmark {spec.name!r}: unknown adapter {adapter_name!r}; known: {sorted(ADAPTERS)}")
    adapter = ADAPTERS[adapter_name] if adapter_name else None
    fields = list(spec.fields) or (list(adapter.fields) if adapter else [])
    if not fields:
        raise ValueError(f"benchmark {spec.name!r}: give `fields` or an `adapter`")
    id_fields = [spec.id_field] if spec.id_field else list(adapter.id_fields if adapter else ())
    header = spec.csv_header if spec.csv_header is not None else (adapter.csv_header if adapter else True)

    rows = _iter_hf(spec) if fmt == "hf" else iter_rows(Path(spec.path or ""), fmt, header)
    ids: list[str] = []
    segments: list[tuple[int, str]] = []
    empty_rows = 0
    for row_no, row in enumerate(rows):
        if spec.max_examples is not None and row_no >= spec.max_examples:
            break
        texts = [t for f in fields for t in _resolve(row, f)]
        for first, second in (adapter.joined if adapter and not spec.fields else ()):
            heads, tails = _resolve(row, first), _resolve(row, second)
            joined = [f"{h} {t}" for h in heads for t in tails]
            if joined:  # the joined sentences replace the separate pieces
                texts = [t for t in texts if t not in tails] + joined
        if not texts:
            empty_rows += 1  # nothing to match; counted in the index stats
            continue
        ex_id = next(
            (str(v) for f in id_fields for v in [_get(row, f)] if v is not None), None
        )
        ex_no = len(ids)
        ids.append(ex_id if ex_id is not None else str(row_no))
        segments.extend((ex_no, t) for t in texts)
    if not ids:
        raise ValueError(f"benchmark {spec.name!r}: no text found in {source} with fields {fields}")
    return Benchmark(spec.name, ids, segments, adapter_name or "fields", source, empty_rows)


def _head(path: Path, fmt: str, csv_header: bool, rows: int = 5) -> list[Any]:
    out: list[Any] = []
    for row in iter_rows(path, fmt, csv_header):
        out.append(row)
        if len(out) >= rows:
            break
    return out


def _get(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


# ------------------------------------------------------------------------ the registry


def _stem(path: Path) -> str:
    name = path.name
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def specs_from(source: str | Path) -> list[BenchmarkSpec]:
    """Benchmark specs from a YAML config, a directory (its ``benchmarks.yaml`` if present,
    else every benchmark file in it, adapters guessed), a single benchmark file, or
    ``"demo"`` (the project's own demo-math set)."""

    path = DATA_DIR if str(source) == "demo" else Path(source)
    if path.is_dir():
        for name in CONFIG_NAMES:
            if (path / name).exists():
                return specs_from(path / name)
        files = sorted(
            p for p in path.iterdir()
            if p.is_file() and not p.name.startswith(".") and p.name.lower().endswith(_SUFFIXES)
        )
        if not files:
            raise ValueError(f"{path}: no benchmark files ({', '.join(_SUFFIXES)})")
        specs = []
        for p in files:
            name, adapter = KNOWN_FILES.get(_stem(p), (_stem(p), None))
            specs.append(BenchmarkSpec(name=name, path=str(p), adapter=adapter))
        return specs
    if not path.exists():
        raise FileNotFoundError(
            f"benchmarks not found: {path}. Give a directory of your benchmark copies "
            f"(JSONL/Parquet files such as gsm8k-test.jsonl.gz, mmlu-test.jsonl.gz; known names "
            f"get their fields mapped), a benchmarks.yaml naming files and fields, one file, or "
            f"'demo' for the bundled demo-math set")
    if path.suffix in (".yaml", ".yml"):
        data = read_yaml(path) or {}
        entries = data.get("benchmarks") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise ValueError(f"{path}: expected a top-level `benchmarks:` list")
        specs = []
        for i, entry in enumerate(entries):
            spec = from_dict(BenchmarkSpec, entry, f"{path.name}:benchmarks[{i}]")
            if spec.path and not Path(spec.path).is_absolute():
                spec.path = str(path.parent / spec.path)
            specs.append(spec)
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"{path}: benchmark names repeat: {names}")
        return specs
    return [BenchmarkSpec(name=_stem(path), path=str(path))]


def select_suite(specs: list[BenchmarkSpec], suite: str) -> tuple[list[BenchmarkSpec], list[str]]:
    """``(specs in the suite, suite names not found among specs)``."""
    if suite == "all":
        return list(specs), []
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(['all', *SUITES])}")
    wanted = SUITES[suite]
    chosen = [s for s in specs if s.name in wanted]
    missing = [n for n in wanted if n not in {s.name for s in specs}]
    if not chosen:
        raise ValueError(f"none of suite {suite!r} ({', '.join(wanted)}) is among the "
                         f"benchmarks found ({', '.join(s.name for s in specs)})")
    return chosen, missing


def shared_benchmark_specs(shared_eval: str | Path) -> list[BenchmarkSpec]:
    """The real benchmark files of ``../shared/eval/benchmarks`` (GSM8K test, HumanEval)."""
    base = Path(shared_eval) / "benchmarks"
    return [
        BenchmarkSpec(name="gsm8k", path=str(base / "gsm8k-test.jsonl.gz"), adapter="gsm8k"),
        BenchmarkSpec(name="humaneval", path=str(base / "humaneval.jsonl.gz"), adapter="humaneval"),
    ]


def demo_benchmark_specs() -> list[BenchmarkSpec]:
    """The project's own benchmark-style set used by the demo (``demo-math``)."""
    return specs_from(DATA_DIR)


def demo_items() -> list[dict[str, str]]:
    """The demo-math problems (``question``, ``answer``), e.g. for the demo site to quote one
    on its deliberately contaminated page."""
    path = DATA_DIR / "demo-math.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_index(
    benchmarks: list[BenchmarkSpec] | str | Path,
    out: str | Path,
    allow_hf: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Build the n-gram index of ``benchmarks`` (specs, or a directory / YAML) in ``out``.

    Returns stats: benchmarks, n-grams per n, bytes, MB per million n-grams and, per
    benchmark, n, examples, examples yielding at least one n-gram, n-grams."""
    specs = specs_from(benchmarks) if isinstance(benchmarks, (str, Path)) else list(benchmarks)
    if not specs:
        raise ValueError("no benchmarks given")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"benchmark names repeat: {names}")
    writer = IndexWriter()
    items: Any = specs
    if progress:
        items = track(specs, "indexing benchmarks", unit="benchmarks")
    records = []
    for spec in items:
        bench = load_benchmark(spec, allow_hf=allow_hf)
        n = choose_n(bench.example_lengths(), spec.n)
        records.append(
            writer.add(
                bench.name,
                n,
                bench.example_ids,
                bench.segments,
                info={
                    "adapter": bench.adapter,
                    "source": bench.source,
                    "rows_without_text": bench.rows_without_text,
                },
            )
        )
    stats = writer.write(out)
    stats["per_benchmark"] = records
    return stats
