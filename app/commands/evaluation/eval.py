"""``afm eval``: evaluate a checkpoint, compare two runs, list tasks, or run lm-eval itself.

Light imports only at module level (``afm --help`` stays instant); JAX and lm-eval load
inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from afm.app.commands.options import NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, SEED

RUN_EPILOG = """\b
Examples:
  afm eval --checkpoint runs/core/model --tokenizer tok/ --tasks afm-tiny --limit 100
  afm eval --checkpoint runs/core/model --tokenizer tok/ --tasks afm-pretrain \\
           --data-dir ../shared/eval/benchmarks --output results/core.json
  afm eval --checkpoint ck/ --tokenizer tok/ --tasks arc_easy,mmlu_anatomy --num-fewshot 5
  afm eval --checkpoint ck/ --tokenizer tok/ --tasks afm_niah --niah-lengths 1024,4096
  afm eval --checkpoint ck/ --tokenizer tok/ --perplexity-data 'heldout/*.parquet'
  afm eval --checkpoint ck/ --tokenizer tok/ --tasks afm-offline --decontam-index idx/
  afm eval --checkpoint sft/best --tokenizer tok/ --tasks afm-bfcl,afm-safety --limit 50
  afm eval --checkpoint sft/best --tokenizer tok/ --tasks afm-posttrain --data-dir bench/ \\
           --judge openai:http://localhost:8000/v1 --judge-model judge-70b --judge-cache judge.sqlite
  afm eval compare results/core.json results/continued.json
  afm eval tasks --data-dir ../shared/eval/benchmarks
  afm eval harness --allow-hub -- run --model afm --model_args checkpoint=ck,tokenizer=tok --tasks piqa
\b
Tasks are lm-eval task names (arc_easy, hellaswag, mmlu, mmlu_<subject>, gsm8k_cot,
minerva_math, humaneval, ifeval, ...), afm's post-training tasks (bfcl_simple, bfcl_multiple,
bfcl_parallel, bfcl_parallel_multiple, bfcl_irrelevance, bfcl_live_*, alpaca_eval,
arena_hard, afm_writing, safety_harmbench, safety_xstest, overrefusal_xstest) or groups:
afm-pretrain (the report's table), afm-core-en, afm-offline, afm-tiny, afm-long-context,
afm-posttrain, afm-bfcl, afm-writing, afm-safety. Judged tasks need --judge; safety without
one uses the keyword refusal detector (weaker, labelled so). Data is read from --data-dir
(default: $AFM_EVAL_DATA, else ../shared/eval/benchmarks when present); the hub is used
only with --allow-hub. Writes OUTPUT (JSON), OUTPUT.png and OUTPUT.html.
"""


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _ints(value: str | None) -> list[int] | None:
    try:
        return [int(v) for v in _csv(value)] or None
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None


def _floats(value: str | None) -> list[float] | None:
    try:
        return [float(v) for v in _csv(value)] or None
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None


def resolve_checkpoint(path: Path) -> Path:
    """An ``afm.model`` checkpoint: the path itself, or a training workdir's ``model/``."""
    for cand in (path, path / "model"):
        if (cand / "config.json").is_file() and (cand / "params").is_dir():
            return cand
    raise click.BadParameter(
        f"{path} is not a model checkpoint (config.json + params/) nor a training workdir "
        "with model/ in it", param_hint="--checkpoint")


def _check_output(out: Path) -> None:
    """The results file (and its .png / .html siblings) can be written: before any work."""
    for path in (out, out.with_suffix(".png"), out.with_suffix(".html")):
        if path.is_dir():
            raise click.BadParameter(f"{path} is a directory; name a results file, e.g. {out / 'results.json'}",
                                     param_hint="--output")
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise click.BadParameter(f"{parent} is a file, so {out} cannot be created", param_hint="--output")


def _check_sandbox(tasks: list[str], allow_weak: bool) -> None:
    """Tasks that run model-written code need the sandbox: refuse before the model loads."""
    from afm.evaluation.suite import TASKS

    if not any(TASKS[t].kind == "humaneval" for t in tasks if t in TASKS):
        return
    from afm.evaluation.code_metrics import POLICY
    from afm.sandbox import accept_weak_isolation, require

    accept_weak_isolation(allow_weak)
    boundary = require(POLICY)
    if boundary.kind != "kernel":
        from afm.console import console

        console.print(f"[yellow]warning[/] model-written code runs with weak isolation: {boundary.reason}")


def _posttrain_options(opts: dict[str, Any]) -> Any:
    from afm.evaluation.posttrain.judges.judge import JudgeSettings
    from afm.evaluation.posttrain.runner import PosttrainOptions

    judge = None
    if opts["judge"]:
        judge = JudgeSettings(opts["judge"], model=opts["judge_model"],
                              cache=str(opts["judge_cache"]) if opts["judge_cache"] else None,
                              max_concurrency=opts["judge_concurrency"], timeout_s=opts["judge_timeout"],
                              max_retries=opts["judge_retries"], max_tokens=opts["judge_max_tokens"],
                              tokenizer=str(opts["tokenizer"]) if opts["tokenizer"] else None)
    elif opts["judge_model"]:
        raise click.BadParameter("--judge-model without --judge", param_hint="--judge-model")
    return PosttrainOptions(judge=judge, safety_detector=opts["safety_detector"],
                            max_new_tokens=opts["max_new_tokens"], arena_baseline=opts["arena_baseline"],
                            alpaca_annotation=opts["alpaca_annotation"], seed=opts["seed"])


def _check_posttrain(tasks: list[str], options: Any, data_dir: str | None, allow_hub: bool) -> None:
    """Judged tasks need a judge and their files, a judge spec must be well formed and an
    endpoint judge answer: before the model loads."""
    from afm.evaluation.posttrain.judges.judge import check_reachable
    from afm.evaluation.posttrain.runner import check_data, check_tasks, needs_judge
    from afm.evaluation.suite import posttrain_names

    names = posttrain_names(tasks)
    if names:
        check_tasks(names, options)
        check_data(names, options, data_dir, allow_hub)
        if options.judge is not None and needs_judge(names, options):
            check_reachable(options.judge)


def _user_errors() -> tuple[type[BaseException], ...]:
    from afm.evaluation.local_data import LocalDataError
    from afm.evaluation.results import ResultsError
    from afm.evaluation.suite import SuiteError
    from afm.sandbox import SandboxUnavailable

    return (SuiteError, LocalDataError, ResultsError, SandboxUnavailable, FileNotFoundError)


@click.group("eval", invoke_without_command=True, epilog=RUN_EPILOG)
@click.option("--checkpoint", type=click.Path(path_type=Path), help="afm model checkpoint (or a training workdir).")
@click.option("--tokenizer", type=click.Path(path_type=Path), help="Tokenizer directory (default: CKPT/tokenizer or beside CKPT).")
@click.option("--tasks", default="afm-tiny", show_default=True, help="Comma-separated tasks and groups.")
@click.option("--num-fewshot", type=int, default=None, help="Override every task's few-shot count (default: the report's).")
@click.option("--limit", type=POSITIVE, default=None, help="Items per task (a fraction if < 1).")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="Local benchmark files (JSONL/Parquet).")
@click.option("--allow-hub", is_flag=True, help="Let tasks without local files load from the Hugging Face hub "
              "(lm-eval datasets; AlpacaEval 2.0 and Arena-Hard v2.0 files for alpaca_eval, arena_hard).")
@click.option("--output", type=click.Path(path_type=Path), default=None, help="Results JSON (default: eval/<checkpoint name>.json).")
@click.option("--perplexity-data", multiple=True, help="Held-out token shards (file/dir/glob, repeatable).")
@click.option("--perplexity-max-docs", type=int, default=None, help="At most this many held-out documents.")
@click.option("--decontam-index", type=click.Path(path_type=Path), default=None, help="afm decontam index: report per-task coverage.")
@click.option("--niah-lengths", default=None, help="NIAH context lengths in tokens (default: up to the model's window).")
@click.option("--niah-depths", default=None, help="NIAH needle depths in [0, 1] (default: 0,0.25,0.5,0.75,1).")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True, help="Compute dtype.")
@click.option("--max-length", type=int, default=None, help="Context length (default: the model's max_seq_len).")
@click.option("--tokens-per-batch", type=POSITIVE_INT, default=None,
              help="Scoring batch size in tokens (default: 4096 on CPU, 8192 on accelerators).")
@click.option("--batch-size", type=int, default=16, show_default=True, help="Prompts decoded together.")
@click.option("--mesh", default=None, help="Device mesh DATAxFSDPxTENSORxSEQUENCE, e.g. 2x1x4x1 (default: data over all devices).")
@click.option("--seed", type=SEED, default=1234, show_default=True)
@click.option("--items", "item_scores", is_flag=True,
              help="Keep every item's scores in the results (paired comparisons: afm ablate).")
@click.option("--judge", default=None, metavar="SPEC",
              help="Judge for alpaca_eval, arena_hard, afm_writing (and safety): openai:URL (with --judge-model), "
                   "checkpoint:PATH, or rm:PATH (a reward model; pairwise only).")
@click.option("--judge-model", default=None, help="The model name an openai:URL judge serves.")
@click.option("--judge-cache", type=click.Path(path_type=Path), default=None,
              help="SQLite cache of judgments (a re-run replays them).")
@click.option("--judge-concurrency", type=POSITIVE_INT, default=8, show_default=True,
              help="Judge requests in flight at once.")
@click.option("--judge-timeout", type=POSITIVE, default=120.0, show_default=True,
              help="Seconds per judge request before it counts as failed.")
@click.option("--judge-retries", type=NON_NEGATIVE_INT, default=3, show_default=True,
              help="Retries of a judge request (connection errors, 429, 5xx).")
@click.option("--judge-max-tokens", type=POSITIVE_INT, default=1024, show_default=True,
              help="Longest judgment (a checkpoint judge: at most half its window).")
@click.option("--safety-detector", type=click.Choice(["keyword", "judge"]), default=None,
              help="How safety replies are classified (default: judge with --judge, else the weaker keyword detector).")
@click.option("--max-new-tokens", type=POSITIVE_INT, default=None,
              help="Reply length for post-training tasks (default: 256 for BFCL and safety, more for writing).")
@click.option("--arena-baseline", default=None, metavar="MODEL|CATEGORY=MODEL,...",
              help="Arena-Hard baseline (its model_answer/MODEL.jsonl), or one per question category "
                   "(default: v2.0's o3-mini for hard_prompt, gemini-2.0-flash for creative_writing).")
@click.option("--alpaca-annotation", type=click.Choice(["weighted", "games"]), default="weighted", show_default=True,
              help="How alpaca_eval gets its preferences: AlpacaEval 2.0's weighted annotator (the judge's "
                   "log-probs of one token; a judge that returns log-probs), or two position-swapped "
                   "Arena-style games (a different method; the results say which ran).")
@click.option("--allow-weak-sandbox", is_flag=True,
              help="Run model-written code (humaneval) with process limits only where this host cannot "
                   "give it namespaces of its own (default: refuse).")
@click.pass_context
def eval_group(ctx: click.Context, **opts: Any) -> None:
    """Evaluate a checkpoint on the report's benchmarks (lm-eval tasks, native JAX backend)."""
    if ctx.invoked_subcommand is not None:
        return
    if opts["checkpoint"] is None:
        raise click.UsageError("missing --checkpoint (see afm eval --help)")
    _run(opts)


def _run(opts: dict[str, Any]) -> None:
    import tempfile

    from afm.console import setup_logging
    from afm.evaluation.cpu_devices import use_cpu_cores

    setup_logging("WARNING")
    use_cpu_cores()  # before JAX starts: a device per core on a CPU host (afm.evaluation.cpu_devices)
    ckpt = resolve_checkpoint(opts["checkpoint"])
    from afm.evaluation.suite import default_data_dir

    tasks = _csv(opts["tasks"])
    with tempfile.TemporaryDirectory(prefix="afm-demo-eval-") as scratch:  # removed however the run ends
        data_dir = str(opts["data_dir"]) if opts["data_dir"] else default_data_dir()
        if tasks == ["afm-demo"]:  # the bundled demo items, with the user's own copies in their place
            from afm.evaluation.suite import prepare_demo_data

            data_dir = prepare_demo_data(scratch, own=str(opts["data_dir"]) if opts["data_dir"] else None)
        _run_with_data(opts, ckpt, tasks, data_dir)


def _run_with_data(opts: dict[str, Any], ckpt: Path, tasks: list[str], data_dir: str | None) -> None:
    from afm.console import console
    from afm.evaluation.report import print_results, write_report
    from afm.evaluation.results import write_results
    from afm.evaluation.runner import EvalSpec, run_eval
    from afm.evaluation.suite import expand

    niah = {k: v for k, v in (("lengths", _ints(opts["niah_lengths"])),
                              ("depths", _floats(opts["niah_depths"]))) if v}
    limit = opts["limit"]
    if limit is not None and limit >= 1:
        limit = int(limit)
    posttrain = _posttrain_options(opts)
    spec = EvalSpec(
        checkpoint=str(ckpt), tokenizer=str(opts["tokenizer"]) if opts["tokenizer"] else None,
        tasks=tasks, num_fewshot=opts["num_fewshot"], limit=limit, data_dir=data_dir,
        demo_data=tasks == ["afm-demo"],
        allow_hub=opts["allow_hub"], dtype=opts["dtype"], max_length=opts["max_length"],
        tokens_per_batch=opts["tokens_per_batch"], gen_batch=opts["batch_size"],
        mesh=opts["mesh"], perplexity_data=list(opts["perplexity_data"]),
        perplexity_max_docs=opts["perplexity_max_docs"],
        decontam_index=str(opts["decontam_index"]) if opts["decontam_index"] else None,
        niah=niah, seed=opts["seed"], posttrain=posttrain, item_scores=opts["item_scores"],
    )
    out = opts["output"] or Path("eval") / f"{ckpt.parent.name if ckpt.name == 'model' else ckpt.name}.json"
    _check_output(out)
    try:
        if tasks:
            _check_sandbox(expand(tasks), opts["allow_weak_sandbox"])  # unknown names fail before the model loads
            _check_posttrain(tasks, posttrain, data_dir, opts["allow_hub"])
        console.print(f"afm eval: {ckpt}  tasks={','.join(tasks) or '-'}  data={data_dir or 'hub'}")
        results = run_eval(spec)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:  # bad model/tokenizer arguments, lengths that do not fit
        raise click.ClickException(str(exc)) from None
    write_results(results, out)
    write_report(results, out.with_suffix(".png"), out.with_suffix(".html"))
    print_results(results)
    for task, used in sorted(results.get("data", {}).items()):  # which items: the user's copies or ours
        console.print(f"data {task}: {used}", highlight=False)
    t = results["timing"]
    console.print(f"results: {out}  plot: {out.with_suffix('.png')}  report: {out.with_suffix('.html')}  "
                  f"({t['total_s']:.1f} s)")
    for task, note in results.get("notes", {}).items():
        console.print(f"[yellow]note[/] {task}: {note}")


@eval_group.command("compare", epilog="""\b
Examples:
  afm eval compare eval/core.json eval/continued.json
  afm eval compare a.json b.json --json > diff.json
""")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on stdout.")
def compare_command(a: Path, b: Path, as_json: bool) -> None:
    """Side-by-side table of two results files (B - A, * where beyond 2 stderr)."""
    import json

    from afm.evaluation.report import print_comparison
    from afm.evaluation.results import ResultsError, compare, read_results

    try:
        ra, rb = read_results(a), read_results(b)
    except ResultsError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(compare(ra, rb), indent=2))
        return
    print_comparison(ra, rb, str(a), str(b))


@eval_group.command("tasks", epilog="""\b
Examples:
  afm eval tasks
  afm eval tasks --data-dir ../shared/eval/benchmarks
""")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None)
def tasks_command(data_dir: Path | None) -> None:
    """List the task groups and tasks, and which local file each would read."""
    from afm.console import print_table
    from afm.evaluation.local_data import find_file
    from afm.evaluation.suite import GROUPS, TASKS, default_data_dir

    root = str(data_dir) if data_dir else default_data_dir()
    print_table("groups", ["group", "tasks"], [[g, ", ".join(t)] for g, t in GROUPS.items()])
    rows = []
    for spec in TASKS.values():
        files = []
        for split, stems in spec.splits.items():
            found = find_file(root, stems) if root else None
            files.append(f"{split}: {found.name if found else '-'}")
        if spec.kind == "niah":
            files = ["generated"]
        elif spec.kind == "posttrain":
            files = ["BFCL / safety / writing files, or afm's shipped ones (docs/evaluation.md)"]
        rows.append([spec.name, spec.num_fewshot, "; ".join(files), spec.note])
    print_table(f"tasks (data: {root or 'none'})", ["task", "shots", "local files", "note"], rows)


@eval_group.command("harness", context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
                    epilog="""\b
Examples:
  afm eval harness --allow-hub -- run --model afm --model_args checkpoint=ck,tokenizer=tok --tasks piqa
  afm eval harness -- ls tasks
""")
@click.option("--allow-hub", is_flag=True, help="Let lm-eval's tasks download their data from the hub.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def harness_command(allow_hub: bool, args: tuple[str, ...]) -> None:
    """lm-eval's own command line, with ``--model afm`` registered.

    lm-eval's task YAMLs read the Hugging Face hub: offline, use --include_path with your
    own YAMLs pointing at local files, or ``afm eval`` (which feeds local data itself)."""
    import sys

    from afm.evaluation.runner import set_offline

    set_offline(allow_hub=allow_hub)
    from lm_eval.__main__ import cli_evaluate

    import afm.evaluation.harness  # noqa: F401  (registers --model afm)

    sys.argv = ["lm-eval", *args]
    cli_evaluate()


COMMANDS = [eval_group]
