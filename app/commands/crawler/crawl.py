"""``afm crawl``, ``afm crawler daemon``, ``afm robots check`` and ``afm robots snapshots``.

Only click and the standard library at import time: Scrapy loads inside the commands.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


def _finish(summary: dict, title: str) -> None:
    from afm.console import print_summary

    rows: dict[str, object] = {
        "pages": summary["pages"],
        "pages/s": float(summary["pages_per_s"]),
        "bytes": summary["bytes"],
        "robots denials": summary["robots_denied"],
        "noindex": summary["noindex"],
        "training opt-outs (stored, marked)": summary.get("training_optout", 0),
        "robots.txt/tdmrep.json snapshots": summary.get("control_file_snapshots", 0),
        "scheduled": summary["scheduled"],
    }
    for status, count in sorted(summary["status_counts"].items()):
        rows[f"HTTP {status}"] = count
    for kind, count in sorted(summary["outcomes"].items()):
        rows[kind] = count
    for kind, count in sorted(summary["skipped"].items()):
        rows[f"skipped {kind}"] = count
    rows["WARC files"] = len(summary["warc_files"])
    rows["index"] = summary["index_path"]
    print_summary(title, rows)


@click.command(
    "crawl",
    epilog="""\b
Examples:
  afm crawl --seeds seeds.txt --out crawl/ --max-pages 5000
  afm crawl --seeds https://example.com/ --out crawl/ --user-agent afmbot
  afm crawl --seeds http://127.0.0.1:8000/ --out crawl/ --allow-private  # local test site
  afm crawl --config crawl.yaml --set fallback_agent=Googlebot
  afm crawl --seeds seeds.txt --out crawl/ --set 'training_agents=[preset:ai-training]'  # any AI crawler's rules
  afm crawl --seeds seeds.txt --out crawl/ --set 'training_agents=[mybot-extended]'  # one more token
  afm crawl --seeds seeds.txt --out crawl/ --set tdmrep=false --set 'directives=[]'
""",
)
@click.option("--seeds", multiple=True, help="Seed URL or file of URLs (repeatable; also positional).")
@click.argument("more_seeds", nargs=-1)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Output directory (WARC, index, state).")
@click.option("--max-pages", type=int, help="Pages to schedule at most (default 1000).")
@click.option("--user-agent", help="Our robots.txt product token (default afmbot).")
@click.option("--fallback-agent", help="Token whose robots.txt group we obey when ours is not named.")
@click.option("--allow-private", is_flag=True, default=None, help="Allow loopback/private addresses.")
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), help="YAML CrawlConfig.")
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE (repeatable).")
def crawl_command(
    seeds: tuple[str, ...],
    more_seeds: tuple[str, ...],
    out_dir: Path | None,
    max_pages: int | None,
    user_agent: str | None,
    fallback_agent: str | None,
    allow_private: bool | None,
    config_file: Path | None,
    overrides: tuple[str, ...],
) -> None:
    """One-shot crawl: fetch politely from the seeds, write WARC + a Parquet index.

    Each page's training use (noai, TDMRep, robots.txt for every training token, Content
    Signals, Content-Usage) is recorded with its evidence; every robots.txt /
    tdmrep.json is kept in OUT/robotstxt/.

    Re-running with the same --out resumes: pages whose records were lost with an
    unfinished WARC file are fetched again, finished ones are not.
    """
    from afm.config import ConfigError, load_config, print_config
    from afm.crawler.config import CrawlConfig
    from afm.crawler.run import run_crawl

    given: dict[str, object] = {}
    all_seeds = list(seeds) + list(more_seeds)
    if all_seeds:
        given["seeds"] = all_seeds
    for key, value in (("out_dir", str(out_dir) if out_dir else None), ("max_pages", max_pages),
                       ("user_agent", user_agent), ("fallback_agent", fallback_agent),
                       ("allow_private", allow_private)):
        if value is not None:
            given[key] = value
    try:
        cfg = load_config(CrawlConfig, given, overrides, base=load_config(CrawlConfig, config_file))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    if not cfg.seeds and not cfg.inbox:
        raise click.UsageError("no seeds: give --seeds URL_OR_FILE")
    print_config(cfg, "crawl config")
    try:
        summary = run_crawl(cfg)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    _finish(summary, "crawl summary")


@click.group("crawler")
def crawler_group() -> None:
    """The long-running crawler daemon."""


@crawler_group.command(
    "daemon",
    epilog="""\b
Examples:
  afm crawler daemon --config crawl.yaml
  # crawl.yaml:  {out_dir: crawl/, inbox: seeds-inbox/, max_pages: 1000000}
  # add seeds while it runs:  cp more.txt seeds-inbox/
  # two daemons, one frontier:  --set redis_url=redis://127.0.0.1:6379/0
""",
)
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE (repeatable).")
def daemon_command(config_file: Path, overrides: tuple[str, ...]) -> None:
    """Crawl until stopped: takes seed files dropped in the inbox, survives restarts.

    SIGTERM (or Ctrl-C) stops cleanly: in-flight requests are abandoned (and re-fetched
    on restart), the open WARC file is closed and indexed. After kill -9 a restart
    re-fetches exactly the pages of the unfinished WARC file.
    """
    from afm.config import ConfigError, load_config, print_config
    from afm.crawler.config import CrawlConfig
    from afm.crawler.run import run_crawl

    try:
        cfg = load_config(CrawlConfig, config_file, ("daemon=true", *overrides))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    print_config(cfg, "crawler daemon config")
    summary = run_crawl(cfg)
    _finish(summary, "crawler daemon summary")


@crawler_group.command(
    "status",
    epilog="""\b
Examples:
  afm crawler status --out /var/lib/afm/crawl/web1          # the daemon writing there
  afm crawler status --url http://127.0.0.1:9410
  afm crawler status --redis-url redis://10.0.0.5:6379/0 --redis-key afm-web   # every daemon on it
  afm crawler status --out crawl/ --health                  # exit 0 when healthy (HEALTHCHECK)
  afm crawler status --config crawl.yaml --wait 60          # wait until healthy (systemd start)
  curl -s http://127.0.0.1:9410/metrics                     # what Prometheus scrapes
""",
)
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="The daemon's config: its out_dir finds the endpoint (the systemd unit, the image).")
@click.option("--out", "out_dir", default=None, help="A running daemon's output directory (finds its endpoint).")
@click.option("--url", default=None, help="The daemon's endpoint, http://HOST:PORT (default port 9410).")
@click.option("--redis-url", default=None, help="A shared Redis frontier: queue, seen URLs, every daemon.")
@click.option("--redis-key", default="afm", show_default=True, help="The frontier's key (the daemons' redis_key).")
@click.option("--health", is_flag=True, help="One line and the exit status only: 0 healthy, 1 not.")
@click.option("--wait", "wait_s", type=float, default=None, metavar="SECONDS",
              help="Wait up to SECONDS for the daemon to become healthy (exit 1 if it does not).")
def status_command(config_file: Path | None, out_dir: str | None, url: str | None, redis_url: str | None,
                   redis_key: str, health: bool, wait_s: float | None) -> None:
    """What a running crawler daemon, or a Redis frontier shared by several, is doing."""
    from afm.console import print_summary, print_table
    from afm.crawler.operations.status import (
        StatusError,
        daemon_status,
        endpoint_url,
        frontier_status,
        wait_healthy,
    )

    if sum(x is not None for x in (config_file, out_dir, url, redis_url)) != 1:
        raise click.UsageError("give one of --config FILE, --out DIR, --url http://HOST:PORT or --redis-url URL")
    if config_file is not None:
        from afm.config import ConfigError, load_config
        from afm.crawler.config import CrawlConfig

        try:
            out_dir = load_config(CrawlConfig, config_file).out_dir
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from exc
    try:
        if redis_url:
            front = frontier_status(redis_url, redis_key)
            print_summary(f"frontier {redis_key}", {"requests queued": front["queued"],
                                                     "URLs seen": front["seen"], "daemons": len(front["daemons"])})
            if front["daemons"]:
                print_table("daemons (last heartbeat)", ["daemon", "pages", "bytes", "in flight", "seconds ago",
                                                         "output"],
                            [[d["daemon"], d["pages"], d["bytes"], d["in_flight"],
                              f"{d['age_s']:.0f}" + (" (stale)" if d["stale"] else ""), d["out_dir"]]
                             for d in front["daemons"]])
            return
        target = url or endpoint_url(out_dir)  # type: ignore[arg-type]
        if wait_s is not None:
            got = wait_healthy(url or str(out_dir), wait_s)
            click.echo(f"healthy: {got.url} ({got.health.get('pages', 0)} pages)")
            return
        got = daemon_status(target, with_metrics=not health)
    except StatusError as exc:
        raise click.ClickException(str(exc)) from exc
    if health:
        click.echo(f"{'healthy' if got.healthy else 'unhealthy'}: {got.url} {got.health}")
        sys.exit(0 if got.healthy else 1)
    m = got.metrics
    rows: dict[str, object] = {"endpoint": got.url, "health": got.health.get("status", "?"),
                               "uptime s": got.health.get("uptime_s", 0)}
    for name in ("pages", "bytes", "robots_denied", "robots_fetches", "scheduled", "warc_files_closed"):
        rows[name.replace("_", " ")] = int(m.get(f"afm_crawler_{name}_total", 0))
    rows["frontier"] = int(m.get("afm_crawler_frontier_requests", -1))
    rows["in flight"] = int(m.get("afm_crawler_in_flight_requests", 0))
    for key, value in sorted(m.items()):
        for family in ("responses", "training_use", "errors"):
            if key.startswith(f"afm_crawler_{family}_total{{"):
                rows[f"{family.replace('_', ' ')} {key.split('=', 1)[1].rstrip('}')}"] = int(value)
    rows["memory MB"] = round(m.get("process_resident_memory_bytes", 0) / 2**20, 1)
    print_summary("crawler status", rows)
    if not got.healthy:
        sys.exit(1)


@click.group("robots")
def robots_group() -> None:
    """robots.txt tools (RFC 9309)."""


@robots_group.command(
    "check",
    epilog="""\b
Examples:
  afm robots check --robots robots.txt --agent afmbot https://example.com/private/x
  afm robots check --robots robots.txt --agent afmbot --fallback Googlebot URL1 URL2
  afm robots check --robots robots.txt --agent afmbot --training preset:ai-training URL
""",
)
@click.option("--robots", "robots_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--agent", required=True, help="Product token to decide for.")
@click.option("--fallback", default=None, help="Token whose group applies when neither --agent nor * is named.")
@click.option("--fallback-first", is_flag=True, help="Prefer the fallback's group over * (Applebot's own order).")
@click.option("--training", "training", multiple=True,
              help="Also decide training use for these training tokens / presets "
                   "(afmbot-extended always; e.g. preset:ai-training), as the crawler does.")
@click.argument("urls", nargs=-1, required=True)
def robots_check_command(
    robots_file: Path, agent: str, fallback: str | None, fallback_first: bool,
    training: tuple[str, ...], urls: tuple[str, ...]
) -> None:
    """Print `allowed URL` or `disallowed URL` per URL, deciding exactly as the crawler does.

    With --training, a second line per URL says `training allowed URL` or `training optout
    URL` and the signals (robots.txt groups of the training tokens, Content-Signal,
    Content-Usage). URLs and rules are compared as RFC 9309 2.2.2 says (unreserved
    escapes decoded, non-ASCII octets encoded); the file is read as a 200 response.
    """
    from afm.consent.robots import rules_from_fetch
    from afm.consent.training import ConsentSettings
    from afm.console import print_summary

    rules = rules_from_fetch(200, robots_file.read_bytes())
    policy = None
    if training:
        try:
            policy = ConsentSettings(training_agents=list(training), fallback_agent=fallback,
                                     fallback_first=fallback_first).training_policy(agent)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
    allowed = 0
    for url in urls:
        ok = rules.allowed(url, agent, fallback, fallback_first)
        allowed += ok
        click.echo(f"{'allowed' if ok else 'disallowed'} {url}")
        if policy is not None:
            decision = policy.decide(url, robots=rules)
            why = "; ".join(f"{e['signal']}: {e.get('rule', '')} ({', '.join(e.get('agents') or [])})"
                            for e in decision.evidence)
            click.echo(f"training {decision.use} {url}" + (f"  [{why}]" if why else ""))
    sys.stdout.flush()
    delay = rules.crawl_delay(agent, fallback, fallback_first)
    print_summary("robots check", {"allowed": allowed, "disallowed": len(urls) - allowed,
                                   "crawl-delay": "-" if delay is None else delay,
                                   "sitemaps": len(rules.sitemaps)})


@robots_group.command(
    "snapshots",
    epilog="""\b
Examples:
  afm robots snapshots --out robots-store/ crawl/
  afm robots snapshots --out robots-store/ crawl-2024/ crawl-2025/ 'cc-robots/*.warc.gz'
  afm robots snapshots --out robots-store/ robots-store-old/ crawl/ --overwrite
  afm curate --input crawl/ --output corpus/ --robots-snapshots robots-store/ ...
""",
)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "out", required=True, help="Store directory to write (local, gs://, s3://).")
@click.option("--overwrite", is_flag=True, help="Replace what OUT holds.")
def robots_snapshots_command(inputs: tuple[str, ...], out: str, overwrite: bool) -> None:
    """Build a robots.txt / tdmrep.json snapshot store for `afm curate`'s optout stage.

    INPUTS are crawl output directories (their robotstxt/ WARCs), robots.txt WARC files
    or globs (Common Crawl's robotstxt/*.warc.gz) and earlier stores. Every snapshot that
    can still decide is kept per host: the newest conclusive one (2xx, 4xx) and the
    newer failed, damaged or redirected ones (a redirect never supersedes: its target may
    be missing or damaged), so an opt-out is never dropped from the store. A damaged
    record whose URL cannot be read is an error: the host it belongs to cannot be known.
    """
    from afm.consent.snapshots import build_store
    from afm.console import print_summary

    manifest = build_store(list(inputs), out, overwrite=overwrite)
    print_summary("robots snapshots", {
        "records read": manifest["records_read"],
        "snapshots read": manifest["snapshots_read"],
        "damaged": manifest["damaged_read"],
        "hosts": manifest["hosts"],
        "kept": manifest["kept"],
        "superseded": manifest["superseded"],
        **{f"kept {k}": v for k, v in manifest["kept_by_kind"].items()},
        "store": out,
    })


@robots_group.command(
    "agents",
    epilog="""\b
Examples:
  afm robots agents                                  # the preset:ai-training list, with sources
  afm robots agents --from robots.json               # what a newer ai.robots.txt file adds
  afm robots agents --from robots.json --write       # add it to the packaged list
  afm robots agents --from robots.json --write --out my-agents.json
""",
)
@click.option("--from", "source", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An ai.robots.txt robots.json file (its format: name -> {operator, function}).")
@click.option("--commit", default=None, help="The upstream commit the file is from (recorded as its source).")
@click.option("--write", is_flag=True, help="Write the merged list (only ever adds agents).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where --write writes (default: the packaged consent/ai_training_agents.json).")
def robots_agents_command(source: Path | None, commit: str | None, write: bool,
                          out: Path | None) -> None:
    """List the AI-training crawlers of `preset:ai-training`, or update them from a newer
    robots.json of the ai.robots.txt project without a code change.

    An agent is added when its robots.json `function` says AI training or data sets
    (training, datasets, LLMs, machine learning, AI models, "AI Data Scrapers", "AI Data
    Providers"); an update never removes one. The preset is read from the data file when
    afm starts, so a written file applies to the next run.
    """
    import json

    from afm.consent.agents import DATA_FILE, agents_from_robots_json, load_agents, merge_agents
    from afm.console import print_summary

    data = load_agents(out if out is not None and out.exists() else DATA_FILE)
    added: list[dict[str, str]] = []
    if source is not None:
        try:
            upstream = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"--from {source}: not a JSON file ({exc})") from exc
        where = f"ai.robots.txt robots.json{' @' + commit[:7] if commit else ''} (function)"
        data["agents"], added = merge_agents(data["agents"], agents_from_robots_json(upstream, where))
        if commit:
            data.setdefault("upstream", {})["commit"] = commit
    shown = added if source is not None else data["agents"]
    for entry in shown:
        click.echo(f"{'+ ' if source is not None else ''}{entry['token']}\t{entry.get('operator', '')}"
                   f"\t{entry.get('use', '')}\t{entry.get('source', '')}")
    if write and source is None:
        raise click.UsageError("--write needs --from robots.json")
    target = out or DATA_FILE
    if write:
        target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print_summary("robots agents", {"agents": len(data["agents"]), "added": len(added),
                                    "written": str(target) if write else "-"})


COMMANDS = [crawl_command, crawler_group, robots_group]
