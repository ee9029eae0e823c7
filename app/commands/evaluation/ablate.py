"""``afm ablate``: two corpora, one tokenizer, the same model and budget, the same eval
items; the per-task differences with paired standard errors, a table and a plot
(``afm.app.studies.ablation``). ``--demo`` runs the quality filter on vs off on the demo
site's crawl."""

from __future__ import annotations

from pathlib import Path

import click

from afm.app.commands.options import POSITIVE_INT, Number

EPILOG = """\b
Examples:
  afm ablate --demo                                   # quality model on vs off, demo site
  afm ablate --a-corpus corpus-all/ --b-corpus corpus-filtered/ --workdir runs/ablate
  afm ablate --input crawl/ --a-config no_quality.yaml --b-config top10.yaml \\
      --decontam-index idx/ --workdir runs/ablate
  afm ablate --a-corpus A/ --b-corpus B/ --config core --set model=100m \\
      --set data.seq_len=1024 --set data.global_batch_size=256 --token-budget 2e9 \\
      --seeds 0,1,2 --tasks afm-tiny --data-dir ../shared/eval/benchmarks --workdir runs/ab100m

\b
Each arm is a curate output (--a-corpus / --b-corpus) or the curation of --input with its
own config (--a-config / --b-config, CurateConfig YAML). One tokenizer is trained on both
corpora (or --tokenizer), each corpus is tokenized, the same training config (--config,
--set) is trained on each for the same token budget and seeds, and every model is
evaluated on the same items (--tasks, --data-dir, --limit). WORKDIR gets ablation.md
(the table), ablation.png (the plot) and ablation.json. At tiny scale the result checks
the mechanics only: docs/ablation.md gives the budget a real comparison needs.
"""


@click.command("ablate", epilog=EPILOG)
@click.option("--a-corpus", default=None, type=click.Path(file_okay=False), help="Arm A: a curate output.")
@click.option("--b-corpus", default=None, type=click.Path(file_okay=False), help="Arm B: a curate output.")
@click.option("--input", "inputs", multiple=True, help="Curate this for both arms (with --a-config/--b-config).")
@click.option("--a-config", default=None, type=click.Path(dir_okay=False), help="Arm A's CurateConfig YAML.")
@click.option("--b-config", default=None, type=click.Path(dir_okay=False), help="Arm B's CurateConfig YAML.")
@click.option("--decontam-index", default=None, help="Decontamination index for curating --input.")
@click.option("--a-name", default="A", show_default=True)
@click.option("--b-name", default="B", show_default=True)
@click.option("--demo", is_flag=True, help="The demo: crawl the demo site, quality model off (A) vs on (B).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("work/ablate"),
              show_default=True, help="Where everything is written (replaced with --demo).")
@click.option("--config", "train_config", default="tiny-core", show_default=True,
              help="Training stage or YAML (the same for both arms).")
@click.option("--set", "overrides", multiple=True, help="Training config override KEY=VALUE.")
@click.option("--token-budget", type=Number(1), default=None,
              help="Training tokens per arm and seed (default: the config's total_steps x batch x sequence).")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated training seeds.")
@click.option("--tasks", default="arc_easy,piqa,hellaswag", show_default=True,
              help="Comma-separated eval tasks or groups.")
@click.option("--data-dir", default=None, help="Local task data (default: the bundled demo items).")
@click.option("--limit", type=POSITIVE_INT, default=None, help="Items per task.")
@click.option("--tokenizer", default=None, type=click.Path(file_okay=False), help="Use this tokenizer.")
@click.option("--vocab-size", type=POSITIVE_INT, default=512, show_default=True,
              help="Vocabulary of the tokenizer trained on both corpora.")
def ablate_command(a_corpus: str | None, b_corpus: str | None, inputs: tuple[str, ...], a_config: str | None,
                   b_config: str | None, decontam_index: str | None, a_name: str, b_name: str, demo: bool,
                   workdir: Path, train_config: str, overrides: tuple[str, ...], token_budget: float | None,
                   seeds: str, tasks: str, data_dir: str | None, limit: int | None, tokenizer: str | None,
                   vocab_size: int) -> None:
    """Does a curation choice make a better model? Train and evaluate on both corpora."""
    from afm.app.studies.ablation import AblationSpec, Arm, run_ablation, table_lines
    from afm.console import console, print_summary

    try:
        seed_list = tuple(int(s) for s in seeds.split(",") if s.strip())
    except ValueError as exc:
        raise click.BadParameter(f"{seeds!r} is not a comma-separated list of whole numbers",
                                 param_hint="--seeds") from exc
    task_list = tuple(t.strip() for t in tasks.split(",") if t.strip())
    if demo:
        if a_corpus or b_corpus or inputs or a_config or b_config:
            raise click.UsageError("--demo makes its own arms: drop --a-/--b-corpus, --input and --a-/--b-config")
        arms = _demo_arms(workdir)
        a_name, b_name = arms[0].name, arms[1].name
    elif a_corpus or b_corpus:
        if not (a_corpus and b_corpus) or inputs or a_config or b_config:
            raise click.UsageError("give --a-corpus and --b-corpus, or --input with --a-config and --b-config")
        arms = (Arm(a_name, corpus=a_corpus), Arm(b_name, corpus=b_corpus))
    else:
        if not (inputs and a_config and b_config):
            raise click.UsageError("give --a-corpus and --b-corpus, or --input with --a-config and --b-config")
        arms = (Arm(a_name, inputs=list(inputs), config=_with_index(a_config, decontam_index)),
                Arm(b_name, inputs=list(inputs), config=_with_index(b_config, decontam_index)))
    spec = AblationSpec(arms=arms, workdir=workdir, train_config=train_config,
                        token_budget=int(token_budget) if token_budget else None, seeds=seed_list,
                        overrides=tuple(overrides), tasks=task_list, data_dir=data_dir, limit=limit,
                        tokenizer=tokenizer, vocab_size=vocab_size)
    result = run_ablation(spec, log=lambda m: console.print(f"[cyan]ablate:[/] {m}"))
    click.echo("\n".join(table_lines(result)))
    print_summary("afm ablate", {"table": result["table"], "plot": result["plot"] or "matplotlib missing: no plot",
                                 "results": str(workdir / "ablation.json"), "seconds": result["seconds"]})


def _with_index(config: str, index: str | None) -> dict:
    """A curate config file as a dict, with the decontamination index given on the
    command line (curate has no default index)."""
    import yaml

    data = yaml.safe_load(Path(config).read_text()) or {}
    if not isinstance(data, dict):
        raise click.BadParameter(f"{config}: a CurateConfig YAML is a mapping")
    if index:
        data.setdefault("decontaminate", {}).setdefault("params", {})["index"] = index
    return data


def _demo_arms(workdir: Path) -> tuple:
    """Crawl the demo site into ``workdir`` (replaced) and return the demo's two arms:
    the demo's curate config without the quality model (A) and with it keeping the best
    half of the documents by its score (B)."""
    import shutil

    from afm.app.demo import crawl_demo_site
    from afm.app.studies.ablation import Arm

    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    crawl_dir, snapshots, index = crawl_demo_site(workdir)
    base = {"decontaminate": {"params": {"index": str(index)}},
            "optout": {"params": {"snapshots": [str(snapshots)]}}}
    return (Arm("quality model off", inputs=[str(crawl_dir)], config={**base, "quality_model": {"enabled": False}}),
            Arm("quality model, best half", inputs=[str(crawl_dir)],
                config={**base, "quality_model": {"params": {"top_fraction": 0.5}}}))


COMMANDS = [ablate_command]
