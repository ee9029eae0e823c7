"""``afm synth math|code|tool``: synthetic SFT data (report §4.1.2). Light imports only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from afm.app.commands.options import FRACTION, NON_NEGATIVE, POSITIVE, SEED

GENERATOR_HELP = """\b
Generators (--generator):
  checkpoint:PATH           an afm checkpoint (chat template, KV-cache sampling); --tokenizer
                            or PATH/tokenizer
  openai:URL                an OpenAI-compatible server, e.g. openai:http://localhost:8000/v1
                            (vLLM: `vllm serve MODEL`); --model names the model; the key is
                            read from AFM_SYNTH_API_KEY or OPENAI_API_KEY
  module:factory            your own: factory(**options) returns an object with name and
                            generate(requests, on_result=None)
Every answered request is cached in --cache (default OUTPUT.cache.sqlite): re-running an
interrupted command replays them and sends only the rest.
"""


def generator_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--output", required=True, help="Output directory (conversations.jsonl, dropped.jsonl, manifest.json)."),
        click.option("--generator", "generator_spec", required=True, help="checkpoint:PATH, openai:URL or module:factory."),
        click.option("--model", default=None, help="Model name on an OpenAI-compatible server."),
        click.option("--tokenizer", default=None, help="Tokenizer directory for checkpoint: generators."),
        click.option("--cache", default=None, help="Response cache file (default OUTPUT.cache.sqlite)."),
        click.option("--no-cache", is_flag=True, help="Do not cache responses (no resume)."),
        click.option("--concurrency", type=int, default=8, show_default=True, help="HTTP requests in flight."),
        click.option("--rpm", type=POSITIVE, default=None, help="At most this many HTTP requests per minute."),
        click.option("--long-prompts", type=click.Choice(["refuse", "cut"]), default="refuse", show_default=True,
                     help="checkpoint: generators: a prompt longer than the model's window leaves beside "
                          "--max-tokens stops the run (refuse), or keeps its end and is counted (cut)."),
        click.option("--seed", type=SEED, default=0, show_default=True),
        click.option("--overwrite", is_flag=True, help="Replace a finished output."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _run(name: str, kw: dict[str, Any], body: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Generator + output + the pipeline body; user errors become one-line messages."""
    from afm.console import setup_logging
    from afm.outputs import OutputError
    from afm.synth.generators import GenerationError, make_generator
    from afm.synth.run import SynthRun, default_cache, finish, open_output

    setup_logging("WARNING")
    try:
        cache = None if kw["no_cache"] else (kw["cache"] or default_cache(kw["output"]))
        gen = make_generator(kw["generator_spec"], model=kw["model"], tokenizer=kw["tokenizer"], cache=cache,
                             max_concurrency=kw["concurrency"], requests_per_minute=kw["rpm"],
                             long_prompts=kw["long_prompts"])
        out = open_output(kw["output"], kw["overwrite"])
        run = SynthRun(name, gen)
        try:
            section = body(run)
            return finish(run, out, section)
        except BaseException:
            out.abort()
            raise
    except (GenerationError, OutputError, ValueError, FileNotFoundError, TypeError) as exc:
        raise click.ClickException(str(exc)) from exc


def _summary(title: str, manifest: dict[str, Any], output: str) -> None:
    from afm.console import print_summary

    rows: list[tuple[str, Any]] = [("kept", manifest["kept"]), ("dropped", manifest["dropped"])]
    if manifest.get("prompts_cut"):
        rows.append(("prompts cut to the model's window", manifest["prompts_cut"]))
    rows += [(f"dropped {k}", v) for k, v in sorted(manifest["dropped_by_reason"].items())]
    cache = manifest["cache"]
    if isinstance(cache, dict):
        rows.append(("responses replayed / new", f"{cache['replayed']} / {cache['new']}"))
    rows.append(("output", output))
    print_summary(title, rows)


def _read_jsonl(path: str) -> list[Any]:
    from afm.io import read_records

    return list(read_records(path))


def _shipped(name: str) -> str:
    from importlib import resources

    return str(resources.files("afm.synth").joinpath(f"data/{name}"))


@click.group("synth", epilog=GENERATOR_HELP)
def synth_group() -> None:
    """Synthetic SFT data: math, code, tool use (report §4.1.2)."""


@synth_group.command("math", epilog="""\b
Examples:
  afm synth math --seeds seeds.jsonl --output synth/math --generator openai:http://localhost:8000/v1 --model M
  afm synth math --output synth/math --generator checkpoint:runs/sft/best --tokenizer tok/ --samples 8
  afm synth math --seeds math.jsonl --strategies seed,rephrase,reverse --verify majority ...
\b
Seeds: GSM8K layout (question, answer ending in '#### N'), MATH (problem, solution with
\\boxed{}), or question only (then a judge or a majority vote verifies the solutions).
Default seeds: ten problems shipped with afm. Then: afm sft prepare --input OUTPUT ...
""" + GENERATOR_HELP)
@click.option("--seeds", default=None, help="Seed problems (JSONL); default: afm's ten demo seeds.")
@click.option("--strategies", default="seed,rephrase,reverse,depth,breadth", show_default=True)
@click.option("--samples", type=int, default=4, show_default=True, help="Chain-of-thought samples per problem (N).")
@click.option("--temperature", type=NON_NEGATIVE, default=0.8, show_default=True)
@click.option("--max-tokens", type=int, default=512, show_default=True)
@click.option("--verify", type=click.Choice(["judge", "majority"]), default="judge", show_default=True,
              help="How solutions without ground truth are checked.")
@click.option("--min-difficulty", type=int, default=0, show_default=True, help="Depth-evolved problems rated lower are dropped.")
@click.option("--keep-per-problem", type=int, default=2, show_default=True)
@generator_options
def math_command(seeds, strategies, samples, temperature, max_tokens, verify, min_difficulty, keep_per_problem, **kw) -> None:
    """Math problems evolved from seeds, solved N times, kept when the answer checks out."""
    from afm.synth.math_data import MathConfig, synth_math

    cfg = MathConfig(strategies=tuple(s.strip() for s in strategies.split(",") if s.strip()), samples=samples,
                     temperature=temperature, max_tokens=max_tokens, verify=verify, min_difficulty=min_difficulty,
                     keep_per_problem=keep_per_problem, seed=kw["seed"])
    records = _read_jsonl(seeds or _shipped("math_seeds.jsonl"))
    manifest = _run("math", kw, lambda run: synth_math(run, records, cfg))
    _summary("synth math", manifest, kw["output"])
    for strategy, row in manifest["per_strategy"].items():
        click.echo(f"{strategy:>9}: {row['solved']}/{row['problems']} problems with a kept solution")


@synth_group.command("code", epilog="""\b
Examples:
  afm synth code --output synth/code --generator openai:http://localhost:8000/v1 --model M
  afm synth code --topics my-topics.txt --problems-per-topic 10 --solutions 8 --output ... --generator ...
\b
Every candidate runs against every test in afm's sandbox (namespaces of its own: no
network, no view of the host's files or processes; CPU/memory/output/time limits), the
test judged in a second sandboxed process the candidate cannot reach; a pass means the
test ran to the end. OUTPUT/triplets.jsonl holds (question, tests, solution); the
manifest has pass rates per topic and the shares judged outside and unjudgeable.
""" + GENERATOR_HELP)
@click.option("--topics", default=None, help="One topic per line; default: afm's 71 topics.")
@click.option("--problems-per-topic", type=int, default=5, show_default=True)
@click.option("--tests", "tests_per_problem", type=int, default=5, show_default=True)
@click.option("--min-tests", type=int, default=3, show_default=True)
@click.option("--solutions", "solutions_per_problem", type=int, default=4, show_default=True)
@click.option("--min-pass-fraction", type=FRACTION, default=1.0, show_default=True)
@click.option("--timeout", "timeout_s", type=POSITIVE, default=10.0, show_default=True, help="Seconds per sandboxed program.")
@click.option("--workers", type=int, default=4, show_default=True, help="Sandboxed programs run in parallel.")
@click.option("--allow-weak-sandbox", is_flag=True,
              help="Run candidates with process limits only where this host cannot give them namespaces "
                   "of their own (default: refuse).")
@generator_options
def code_command(topics, problems_per_topic, tests_per_problem, min_tests, solutions_per_problem,
                 min_pass_fraction, timeout_s, workers, allow_weak_sandbox, **kw) -> None:
    """Self-instruct code: topics -> problems -> tests + solutions -> sandboxed rejection sampling."""
    from pathlib import Path

    from afm.sandbox import SandboxPolicy, accept_weak_isolation, require
    from afm.synth.code_data import CodeConfig, synth_code

    accept_weak_isolation(allow_weak_sandbox)
    require(SandboxPolicy())  # refuse before any generation when the host cannot isolate

    path = topics or _shipped("code_topics.txt")
    names = [t.strip() for t in Path(path).read_text().splitlines() if t.strip() and not t.startswith("#")]
    cfg = CodeConfig(problems_per_topic=problems_per_topic, tests_per_problem=tests_per_problem, min_tests=min_tests,
                     solutions_per_problem=solutions_per_problem, min_pass_fraction=min_pass_fraction,
                     timeout_s=timeout_s, workers=workers, seed=kw["seed"])
    manifest = _run("code", kw, lambda run: synth_code(run, names, cfg))
    _summary("synth code", manifest, kw["output"])
    from afm.console import print_table

    print_table("pass rate per topic", ["topic", "problems", "candidates", "passing", "kept", "pass rate"],
                [[t, r["problems"], r["candidates"], r["passing"], r["kept"], r["pass_rate"]]
                 for t, r in manifest["per_topic"].items()])


@synth_group.command("tool", epilog="""\b
Examples:
  afm synth tool --output synth/tool --generator openai:http://localhost:8000/v1 --model M
  afm synth tool --tools my-tools.jsonl --queries-per-tool 20 --distractors 4 --output ... --generator ...
""" + GENERATOR_HELP)
@click.option("--tools", "tools_path", default=None, help="Tool library: one OpenAI function schema per line; default: afm's demo tools.")
@click.option("--no-tool-prompts", default=None, help="Requests needing no tool, one per line (default: afm's).")
@click.option("--queries-per-tool", type=int, default=4, show_default=True)
@click.option("--distractors", type=int, default=3, show_default=True, help="Similar tools offered with the right one.")
@click.option("--parallel", type=int, default=10, show_default=True, help="Parallel-call examples.")
@generator_options
def tool_command(tools_path, no_tool_prompts, queries_per_tool, distractors, parallel, **kw) -> None:
    """Function-calling data: single calls among similar tools, parallel calls, no-call replies."""
    from pathlib import Path

    from afm.synth.tool_data import ToolConfig, synth_tool

    library = _read_jsonl(tools_path or _shipped("tools.jsonl"))
    prompts_file = no_tool_prompts or _shipped("no_tool_prompts.txt")
    negatives = [p.strip() for p in Path(prompts_file).read_text().splitlines() if p.strip()]
    cfg = ToolConfig(queries_per_tool=queries_per_tool, distractors=distractors, parallel=parallel, seed=kw["seed"])
    manifest = _run("tool", kw, lambda run: synth_tool(run, library, negatives, cfg))
    _summary("synth tool", manifest, kw["output"])


COMMANDS = [synth_group]
