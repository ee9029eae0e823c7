"""The report's evaluation suite as named lm-eval tasks and groups, with local data.

Each :class:`TaskSpec` names an lm-eval task (its prompt template, metrics and filters are
lm-eval's own YAML, read from the installed package), the local files that hold its
items (see ``afm.evaluation.local_data``), the few-shot count the AFM report uses
(Table 7: 0-shot unless noted; TriviaQA/WebQS 1-shot, MMLU 5-shot, GSM8K 8-shot CoT,
MATH 4-shot CoT, HumanEval pass@1) and the name of its benchmark in the decontamination
registry. :func:`build_task_configs` turns a list of names into lm-eval task configs
whose ``custom_dataset`` reads the local files, so nothing touches the hub unless
``allow_hub`` is set.

The post-training tasks (BFCL, judged writing, safety; kind ``posttrain``) have no lm-eval
config: ``afm.evaluation.posttrain`` runs them. Three tasks are defined here rather than
taken from lm-eval's YAML: ``humaneval`` (lm-eval's
metric loads HF ``code_eval`` from the hub and runs code unsandboxed; ours runs it in
``afm.sandbox``), ``afm_niah`` (synthetic long context, ``afm.evaluation.niah``)
and the MMLU / MATH groups (assembled from the subjects present in the local files).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.errors import UserError
from afm.evaluation.code_metrics import humaneval_config
from afm.evaluation.local_data import LocalDataError, Record, find_file, load_split, read_file
from afm.evaluation.niah import niah_config
from afm.evaluation.posttrain.catalogue import GROUPS as POSTTRAIN_GROUPS
from afm.evaluation.posttrain.catalogue import TASKS as POSTTRAIN_TASKS
from afm.shared_data import find_shared_dir


class SuiteError(UserError):
    """An unknown task or group, or a task whose data cannot be found."""


@dataclass(frozen=True)
class TaskSpec:
    name: str
    splits: dict[str, tuple[str, ...]]  # lm-eval split name -> local file stems
    converter: str = "identity"
    num_fewshot: int = 0
    decontam: str | None = None  # benchmark name in afm.filters.benchmarks
    kind: str = "builtin"  # builtin (lm-eval YAML) | mmlu | math | humaneval | niah
    note: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)


TASKS: dict[str, TaskSpec] = {t.name: t for t in [
    TaskSpec("arc_easy", {"test": ("arc_easy-test", "arc_easy"), "train": ("arc_easy-train",)},
             "arc", decontam="arc"),
    TaskSpec("arc_challenge", {"test": ("arc_challenge-test", "arc_challenge"),
                               "train": ("arc_challenge-train",)}, "arc", decontam="arc"),
    TaskSpec("hellaswag", {"validation": ("hellaswag-validation", "hellaswag_val", "hellaswag"),
                           "train": ("hellaswag-train",)}, "hellaswag", decontam="hellaswag"),
    TaskSpec("lambada_openai", {"test": ("lambada_openai-test", "lambada_openai")}),
    TaskSpec("piqa", {"validation": ("piqa-validation", "piqa"), "train": ("piqa-train",)},
             decontam="piqa"),
    TaskSpec("sciq", {"test": ("sciq-test", "sciq"), "train": ("sciq-train",)}),
    TaskSpec("winogrande", {"validation": ("winogrande-dev", "winogrande-validation", "winogrande"),
                            "train": ("winogrande-train",)}, "winogrande", decontam="winogrande"),
    TaskSpec("triviaqa", {"validation": ("triviaqa-validation", "triviaqa-sm_sub-first2000", "triviaqa"),
                          "train": ("triviaqa-train",)}, "triviaqa", num_fewshot=1, decontam="triviaqa",
             note="shared copy: llm-foundry's 3,000-item subset (first 2,000), answers clipped"),
    TaskSpec("webqs", {"test": ("webqs-test", "webqs"), "train": ("webqs-train",)}, num_fewshot=1),
    TaskSpec("boolq", {"validation": ("boolq-validation", "boolq"), "train": ("boolq-train",)}, "boolq"),
    TaskSpec("openbookqa", {"test": ("openbookqa-test", "openbookqa"), "train": ("openbookqa-train",)},
             "openbookqa"),
    TaskSpec("mmlu", {"test": ("mmlu-test", "mmlu"), "dev": ("mmlu-dev",)}, num_fewshot=5,
             decontam="mmlu", kind="mmlu"),
    TaskSpec("gsm8k_cot", {"test": ("gsm8k-test", "gsm8k")}, num_fewshot=8, decontam="gsm8k",
             note="8-shot chain of thought with lm-eval's fixed exemplars (Wei et al.)"),
    TaskSpec("gsm8k", {"test": ("gsm8k-test", "gsm8k"), "train": ("gsm8k-train",)}, num_fewshot=5,
             decontam="gsm8k"),
    TaskSpec("minerva_math", {"test": ("math-test", "math")}, num_fewshot=4, decontam="math",
             kind="math", note="4-shot CoT with the Minerva exemplars"),
    TaskSpec("humaneval", {"test": ("humaneval", "humaneval-test")}, decontam="humaneval",
             kind="humaneval", note="pass@1, programs run in the afm sandbox"),
    TaskSpec("ifeval", {"train": ("ifeval-input_data", "ifeval")}, decontam="ifeval"),
    TaskSpec("afm_niah", {}, kind="niah", note="synthetic needle in a haystack (RULER-style)"),
    # Post-training evaluations lm-eval has no task for (tool use, judged writing, safety):
    # run by afm.evaluation.posttrain on the model's chat replies.
    *(TaskSpec(t.name, {}, kind="posttrain", note=t.note) for t in POSTTRAIN_TASKS.values()),
]}

GROUPS: dict[str, tuple[str, ...]] = {
    # The report's pre-training table (Table 7, §6): CoreEN, then MMLU, GSM8K, MATH, HumanEval.
    "afm-core-en": ("arc_challenge", "arc_easy", "hellaswag", "lambada_openai", "piqa", "sciq",
                    "winogrande", "triviaqa", "webqs"),
    "afm-pretrain": ("arc_challenge", "arc_easy", "hellaswag", "lambada_openai", "piqa", "sciq",
                     "winogrande", "triviaqa", "webqs", "mmlu", "gsm8k_cot", "minerva_math",
                     "humaneval"),
    # Everything whose real test data ../shared/eval carries (the rest need --data-dir files).
    "afm-offline": ("arc_challenge", "arc_easy", "lambada_openai", "piqa", "winogrande", "triviaqa",
                    "boolq", "openbookqa", "mmlu", "gsm8k_cot", "minerva_math", "humaneval"),
    # Log-likelihood only: fast, works on any checkpoint (the demo and the training hook).
    "afm-tiny": ("arc_easy", "piqa", "winogrande", "lambada_openai"),
    "afm-long-context": ("afm_niah",),
    # What `afm demo` runs on its own data (prepare_demo_data): every request type once.
    "afm-demo": ("arc_easy", "piqa", "hellaswag", "gsm8k", "afm_niah"),
    "afm-instruct": ("ifeval",),  # needs NLTK's punkt_tab data (see _check_nltk_for_ifeval)
    # The report's post-training evaluation (§6.2-6.3, §7): instruction following, tool use,
    # judged writing (needs --judge and the public prompt files), safety and over-refusal.
    **POSTTRAIN_GROUPS,
    "afm-posttrain": ("ifeval", *POSTTRAIN_GROUPS["afm-bfcl"], *POSTTRAIN_GROUPS["afm-writing"],
                      *POSTTRAIN_GROUPS["afm-safety"]),
}

MMLU_DEFAULT_SUBJECTS = ("abstract_algebra", "college_biology", "high_school_us_history", "marketing")
MATH_TYPES = {
    "Algebra": "algebra", "Counting & Probability": "counting_and_prob", "Geometry": "geometry",
    "Intermediate Algebra": "intermediate_algebra", "Number Theory": "num_theory",
    "Prealgebra": "prealgebra", "Precalculus": "precalc",
}


def expand(names: list[str]) -> list[str]:
    """Group names -> task names (order kept, duplicates dropped); ``mmlu_<subject>`` and
    ``minerva_math_<type>`` name one subject/type."""
    out: list[str] = []
    for name in names:
        members = GROUPS.get(name, (name,))
        for m in members:
            if m not in TASKS and not _is_subtask(m):
                known = ", ".join(sorted(TASKS)) + "; groups: " + ", ".join(sorted(GROUPS))
                raise SuiteError(f"unknown task or group {m!r}; known tasks: {known}")
            if m not in out:
                out.append(m)
    return out


def _is_subtask(name: str) -> bool:
    return (name.startswith("mmlu_") or name.startswith("minerva_math_")) and name not in GROUPS


def spec_for(name: str) -> TaskSpec:
    if name.startswith("mmlu_"):
        return TASKS["mmlu"]
    if name.startswith("minerva_math_"):
        return TASKS["minerva_math"]
    return TASKS[name]


# ------------------------------------------------------------------------ lm-eval configs


@dataclass
class BuildContext:
    """What building task configs needs to know about the run."""

    data_dir: str | None
    allow_hub: bool = False
    num_fewshot: int | None = None  # overrides every task's default
    tokenizer: Any = None  # afm Tokenizer (NIAH sizes its haystacks with it)
    max_length: int = 2048
    niah: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # "task split" -> "N items from FILE"
    demo_data: bool = False  # data_dir is prepare_demo_data's: its own files are the bundled items
    # group name -> (member tasks, metric): aggregated by afm.evaluation.results.add_groups
    # (lm-eval 0.4.13 passes an inline group's own keys down to its members, so groups are
    # averaged here instead, weighted by size as lm-eval's own MMLU group is).
    groups: dict[str, tuple[list[str], str]] = field(default_factory=dict)


# Where each task's YAML lives inside lm-eval's task tree. Indexing only these folders
# takes milliseconds; indexing all of lm-eval's tasks takes ~15 s per process.
TASK_DIRS = {
    "arc_easy": "arc", "arc_challenge": "arc", "hellaswag": "hellaswag", "lambada_openai": "lambada",
    "piqa": "piqa", "sciq": "sciq", "winogrande": "winogrande", "triviaqa": "triviaqa",
    "webqs": "webqs", "boolq": "super_glue/boolq", "openbookqa": "openbookqa", "mmlu": "mmlu/default",
    "gsm8k_cot": "gsm8k", "gsm8k": "gsm8k", "minerva_math": "minerva_math", "ifeval": "ifeval",
}


@functools.cache
def task_manager(folder: str | None = None) -> Any:
    """An lm-eval TaskManager over one task folder (``None``: an empty one, enough for
    ``simple_evaluate`` on inline configs; ``"*"``: all of lm-eval's tasks)."""
    from pathlib import Path

    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    if folder == "*":
        return TaskManager()
    paths = [] if folder is None else [Path(lm_eval.tasks.__file__).parent / folder]
    return TaskManager(include_defaults=False, include_path=paths or None)


def lm_eval_yaml(name: str) -> dict[str, Any]:
    """lm-eval's own config for ``name`` (includes resolved, ``!function`` imported)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    folder = TASK_DIRS.get(spec_for(name).name) if (name in TASKS or _is_subtask(name)) else None
    entry = task_manager(folder).task_index.get(name) if folder else None
    if entry is None:
        entry = task_manager("*").task_index.get(name)
    if entry is None or entry.yaml_path is None:
        raise SuiteError(f"lm-eval {_lm_eval_version()} has no task {name!r}")
    return dict(load_yaml(entry.yaml_path, resolve_func=True))


def _lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def _datasets_from(splits: dict[str, list[Record]]) -> Callable[..., Any]:
    def make(**_ignored: Any) -> Any:
        import datasets

        return datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()})

    return make


def _local_splits(spec: TaskSpec, ctx: BuildContext, where: Callable[[Record], bool] | None = None
                  ) -> dict[str, list[Record]]:
    if not ctx.data_dir:
        raise SuiteError(f"{spec.name}: no --data-dir given (or pass --allow-hub to read the hub)")
    splits: dict[str, list[Record]] = {}
    for split, stems in spec.splits.items():
        docs = load_split(ctx.data_dir, stems, spec.converter, where)
        if docs is not None:
            splits[split] = docs
            path = find_file(ctx.data_dir, stems)
            real = path.resolve() if path is not None else None
            bundled = real is not None and real.parent == Path(ctx.data_dir).resolve()
            origin = "the bundled demo items" if bundled and ctx.demo_data else str(real)
            ctx.sources[f"{spec.name} {split}"] = f"{len(docs)} items from {origin}"
    if not splits:
        stems = sorted({s for st in spec.splits.values() for s in st})
        raise SuiteError(f"{spec.name}: none of {stems} (.jsonl/.jsonl.gz/.parquet) in {ctx.data_dir}")
    return splits


def _localise(cfg: dict[str, Any], splits: dict[str, list[Record]], spec: TaskSpec,
              ctx: BuildContext) -> dict[str, Any]:
    """Point an lm-eval config at in-memory local splits; drop splits we do not have."""
    cfg = dict(cfg)
    cfg["custom_dataset"] = _datasets_from(splits)
    cfg.pop("dataset_kwargs", None)
    for key in ("training_split", "validation_split", "test_split", "fewshot_split"):
        if cfg.get(key) is not None and cfg[key] not in splits:
            cfg[key] = None
    if not any(cfg.get(k) for k in ("validation_split", "test_split")):
        if cfg.get("training_split"):  # a task evaluated on what lm-eval calls train (IFEval)
            return cfg
        raise SuiteError(f"{spec.name}: the local files give splits {sorted(splits)}, "
                         "but the task evaluates another one")
    fewshot = cfg.get("num_fewshot") or 0
    has_examples = cfg.get("fewshot_split") or cfg.get("training_split") or (
        (cfg.get("fewshot_config") or {}).get("samples"))
    if fewshot and not has_examples:
        ctx.notes[spec.name] = ("few-shot examples drawn from the evaluation split itself "
                                "(the item under test excluded): no training split in --data-dir")
    return cfg


def build_task_configs(names: list[str], ctx: BuildContext) -> list[dict[str, Any]]:
    """lm-eval task (or inline group) configs for ``names`` (tasks and groups)."""
    configs: list[dict[str, Any]] = []
    for name in expand(names):
        spec = spec_for(name)
        builder = _BUILDERS[spec.kind]
        for cfg in builder(name, spec, ctx):
            configs.append(cfg)
    return configs


def _fewshot(spec: TaskSpec, ctx: BuildContext) -> int:
    return spec.num_fewshot if ctx.num_fewshot is None else ctx.num_fewshot


def _check_nltk_for_ifeval() -> None:
    """lm-eval's IFEval downloads NLTK's ``punkt_tab`` when imported; offline that fails
    and later scoring breaks. Refuse up front, saying how to provide it."""
    try:
        import nltk

        nltk.data.find("tokenizers/punkt_tab")
    except LookupError:
        raise SuiteError(
            "ifeval needs NLTK's punkt_tab data, which is not installed: run "
            "`python -m nltk.downloader punkt_tab` where the network is reachable (or point "
            "NLTK_DATA at a folder holding tokenizers/punkt_tab)") from None


def _builtin(name: str, spec: TaskSpec, ctx: BuildContext) -> list[dict[str, Any]]:
    if name == "ifeval":
        _check_nltk_for_ifeval()
    cfg = lm_eval_yaml(name)
    cfg["num_fewshot"] = _fewshot(spec, ctx)
    if ctx.allow_hub and not ctx.data_dir:
        return [cfg]
    return [_localise(cfg, _local_splits(spec, ctx), spec, ctx)]


def _mmlu(name: str, spec: TaskSpec, ctx: BuildContext) -> list[dict[str, Any]]:
    """``mmlu``: every subject in the local file as ``mmlu_<subject>``, in one group."""

    path = find_file(ctx.data_dir or "", spec.splits["test"]) if ctx.data_dir else None
    if name != "mmlu":
        subjects = [name.removeprefix("mmlu_")]
    elif path is not None:
        subjects = sorted({r["subject"] for r in read_file(path)})
    else:
        subjects = []
    if not subjects:
        raise SuiteError(f"mmlu: no {spec.splits['test'][0]} file in {ctx.data_dir}")
    subtasks = []
    for subject in subjects:
        cfg = lm_eval_yaml(f"mmlu_{subject}")
        cfg.pop("tag", None)
        cfg["num_fewshot"] = _fewshot(spec, ctx)
        if not (ctx.allow_hub and not ctx.data_dir):
            splits = _local_splits(spec, ctx, where=lambda r, s=subject: r.get("subject") == s)
            cfg = _localise(cfg, splits, spec, ctx)
        subtasks.append(cfg)
    if name == "mmlu":
        ctx.groups["mmlu"] = ([c["task"] for c in subtasks], "acc,none")
    return subtasks


def _math(name: str, spec: TaskSpec, ctx: BuildContext) -> list[dict[str, Any]]:
    """``minerva_math``: one subtask per problem type present locally, in one group."""
    types = list(MATH_TYPES.values()) if name == "minerva_math" else [name.removeprefix("minerva_math_")]
    by_short = {v: k for k, v in MATH_TYPES.items()}
    subtasks = []
    for short in types:
        if short not in by_short:
            raise SuiteError(f"unknown MATH type {short!r}; known: {sorted(by_short)}")
        cfg = lm_eval_yaml(f"minerva_math_{short}")
        cfg.pop("tag", None)
        cfg["num_fewshot"] = _fewshot(spec, ctx)
        if not (ctx.allow_hub and not ctx.data_dir):
            try:
                splits = _local_splits(spec, ctx, where=lambda r, t=by_short[short]: r.get("type") == t)
            except LocalDataError:
                continue  # a file without this type (e.g. a small sample)
            cfg = _localise(cfg, splits, spec, ctx)
        subtasks.append(cfg)
    if not subtasks:
        raise SuiteError(f"{name}: no problems of the requested types in {ctx.data_dir}")
    if name == "minerva_math":
        ctx.groups["minerva_math"] = ([c["task"] for c in subtasks], "exact_match,none")
    return subtasks


def _humaneval(name: str, spec: TaskSpec, ctx: BuildContext) -> list[dict[str, Any]]:
    cfg = humaneval_config()
    if ctx.allow_hub and not ctx.data_dir:
        return [cfg]
    return [_localise(cfg, _local_splits(spec, ctx), spec, ctx)]


def _niah(name: str, spec: TaskSpec, ctx: BuildContext) -> list[dict[str, Any]]:
    return [niah_config(ctx.tokenizer, ctx.max_length, **ctx.niah)]


def _posttrain(name: str, spec: TaskSpec, ctx: BuildContext) -> list[dict[str, Any]]:
    return []  # no lm-eval config: afm.evaluation.posttrain runs these (see runner.run_eval)


def posttrain_names(names: list[str]) -> list[str]:
    """The post-training tasks among ``names`` (tasks and groups), in order."""
    return [n for n in expand(names) if spec_for(n).kind == "posttrain"]


_BUILDERS: dict[str, Callable[[str, TaskSpec, BuildContext], list[dict[str, Any]]]] = {
    "builtin": _builtin, "mmlu": _mmlu, "math": _math, "humaneval": _humaneval, "niah": _niah,
    "posttrain": _posttrain,
}


def default_data_dir() -> str | None:
    """``$AFM_EVAL_DATA`` or ``../shared/eval/benchmarks`` beside the checkout, if present."""
    env = os.environ.get("AFM_EVAL_DATA")
    if env:
        return env

    shared = find_shared_dir()
    if shared is not None and (shared / "eval" / "benchmarks").is_dir():
        return str(shared / "eval" / "benchmarks")
    return None


def prepare_demo_data(out: str | os.PathLike[str], own: str | None = None) -> str:
    """A data directory for ``afm-demo``: the packaged demo items plus the project's
    ``demo-math`` set as ``gsm8k-test`` (all written for this project), each replaced by
    the user's own copy where ``own`` (their ``--data-dir``) holds one: a file of the same
    name stem (``gsm8k-test.jsonl.gz`` replaces the bundled ``gsm8k-test.jsonl``). Which
    file each task read is in the results (``data``) and printed."""
    import shutil
    from importlib import resources
    from pathlib import Path

    from afm.evaluation.local_data import SUFFIXES

    def stem(name: str) -> str:
        for suffix in sorted(SUFFIXES, key=len, reverse=True):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    demo = resources.files("afm.evaluation").joinpath("data/demo")
    for name in ("arc_easy-test.jsonl", "piqa-validation.jsonl", "hellaswag-validation.jsonl"):
        (target / name).write_bytes(demo.joinpath(name).read_bytes())
    math = resources.files("afm.filters").joinpath("data/benchmarks/demo-math.jsonl")
    with resources.as_file(math) as src:
        shutil.copyfile(src, target / "gsm8k-test.jsonl")
    if own:
        mine = [p for p in Path(own).iterdir() if p.is_file() and stem(p.name) != p.name]
        for path in mine:
            for bundled in list(target.iterdir()):
                if stem(bundled.name) == stem(path.name):
                    bundled.unlink()
            (target / path.name).symlink_to(path.resolve())
    return str(target)
