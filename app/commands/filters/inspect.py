"""``afm inspect`` and ``afm extract``: see what the filters do to one page."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from afm.filters.base import explain

INSPECT_EPILOG = """\b
Examples:
  afm inspect page.html --url https://example.org/post
  afm inspect note.txt --json | jq '.decisions[] | select(.keep == false)'
  afm inspect page.html.gz --json > why.json
  afm inspect page.html --source math        # the math source's filters, in its order
  afm inspect page.html --with quality_model  # a stage that is off by default, too

\b
HTML (.html/.htm, optionally .gz) is extracted first; any other file is read as text.
Every filter runs, even after one has dropped the document, so all reasons show.
"""

EXTRACT_EPILOG = """\b
Examples:
  afm extract page.html
  afm extract page.html.gz --url https://example.org/article > article.txt
"""


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".gz":
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise click.ClickException(f"{path}: not a valid gzip file ({exc})") from exc
    return data


def is_html_path(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in (".html", ".htm", ".xhtml")


def inspect_page(
    data: bytes, *, html: bool, url: str | None = None, config: dict[str, Any] | None = None,
    source: str = "web", skipped: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run every page and document stage of ``source`` on one page, in the order ``afm
    curate`` runs them (the stage registry, ``afm.pipelines.curate.stages``): the page
    stage (extraction) on HTML, the document filters on its text (or on a text file as read).

    Returns ``{"text", "language", "decisions": [{"filter", "keep", "reason", "signals",
    "details"}], "pii", "redacted_text"}``; ``text`` is the text the document filters saw
    (extracted or as read), ``redacted_text`` the text as they left it (personal data
    replaced). A decision's ``details`` carry what decided it (a score and its threshold)."""
    from afm.filters.base import Decision
    from afm.filters.extract import decode_html
    from afm.pipelines.curate.stages import page_filters
    from afm.schema import make_document

    decisions: list[dict[str, Any]] = []

    def record(name: str, d: Decision) -> None:
        decisions.append({"filter": name, "keep": bool(d.keep), "reason": d.reason,
                          "signals": {k: _finite(float(v)) for k, v in d.signals.items()},
                          "details": _plain(d.details)})

    def nothing() -> dict[str, Any]:
        return {"text": "", "language": None, "decisions": decisions, "pii": {}, "redacted_text": ""}

    stages = page_filters(config, source=source, strict=False, skipped=skipped)
    doc: dict[str, Any] | None = None
    if not html:
        try:
            text = decode_html(data)[0]
        except (UnicodeError, LookupError):
            text = data.decode("utf-8", errors="replace")
        doc = dict(make_document(text, url=url))
    text = doc["text"] if doc is not None else ""
    for stage, flt in stages:
        is_page_stage = stage.kind == "page"
        if is_page_stage != (doc is None):
            continue  # a page stage runs on HTML only; document filters once there is a text
        subject = {"url": url, "status": 200, "headers": {}, "body": data} if is_page_stage else doc
        try:
            decision = flt(subject)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - shown like the pipeline records it
            decision = Decision.drop(f"error:{type(exc).__name__}", message=str(exc)[:200])
        record(stage.name, decision)
        if is_page_stage:
            if not decision.keep or decision.document is None:
                return nothing()
            doc = dict(decision.document)
            text = doc["text"]
        elif decision.document is not None:
            doc = dict(decision.document)
    if doc is None:
        return nothing()
    return {
        "text": text,
        "language": doc.get("language"),
        "decisions": decisions,
        "pii": dict(doc.get("pii_redactions") or {}),
        "redacted_text": doc.get("text") or "",
    }


def _plain(details: dict[str, Any]) -> dict[str, Any]:
    """A decision's details as JSON can hold them (numbers finite)."""
    return {k: _finite(v) if isinstance(v, float) else v for k, v in details.items()}


def _fmt_signals(signals: dict[str, Any], limit: int = 8) -> str:
    items = [(k, v) for k, v in signals.items() if v not in (0, 0.0, None)] or list(signals.items())
    parts = [f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in items[:limit]]
    if len(items) > limit:
        parts.append(f"... +{len(items) - limit}")
    return " ".join(parts)


@click.command("inspect", epilog=INSPECT_EPILOG)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--url", default=None, help="The page's URL (URL block-lists, document id).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@click.option("--source", type=click.Choice(["web", "math"]), default="web", show_default=True,
              help="Whose filters, in curate's order for that source.")
@click.option("--with", "with_stages", multiple=True,
              help="Also run this stage, off by default in curate (e.g. quality_model).")
def inspect_cmd(file: Path, url: str | None, as_json: bool, source: str, with_stages: tuple[str, ...]) -> None:
    """Show every filter's decision, reason and signals for one HTML or text FILE."""
    from afm.console import console, print_summary, print_table
    from afm.pipelines.curate.stages import FilterSetupError

    try:
        skipped: dict[str, str] = {}
        result = inspect_page(_read(file), html=is_html_path(file), url=url, source=source, skipped=skipped,
                              config=dict.fromkeys(with_stages, True) or None)
    except FilterSetupError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False))
        return
    rows = [
        [d["filter"], "keep" if d["keep"] else "DROP", d["reason"] or "",
         "" if d["keep"] else explain(d["details"]), _fmt_signals(d["signals"])]
        for d in result["decisions"]
    ]
    print_table(f"afm inspect {file.name}", ["filter", "decision", "reason", "why (value vs threshold)", "signals"],
                rows)
    for name, why in skipped.items():
        console.print(f"[yellow]skipped filter {name}: {why}")
    first_drop = next((d for d in result["decisions"] if not d["keep"]), None)
    print_summary(
        "verdict",
        {
            "kept": "no" if first_drop else "yes",
            "dropped by": f"{first_drop['filter']} ({first_drop['reason']})" if first_drop else "-",
            "language": result["language"] or "-",
            "words": len(result["text"].split()),
            "PII replaced": sum(result["pii"].values()),
        },
    )


@click.command("extract", epilog=EXTRACT_EPILOG)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--url", default=None, help="The page's URL (helps the extractor).")
def extract_cmd(file: Path, url: str | None) -> None:
    """Print the main text of an HTML FILE (empty output when there is none)."""
    from afm.console import console
    from afm.filters.extract import Extractor

    decision = Extractor()({"url": url, "status": 200, "headers": {}, "body": _read(file)})
    if decision.keep and decision.document is not None:
        click.echo(decision.document["text"])
    else:
        console.print(f"[yellow]no text extracted: {decision.reason}")


COMMANDS = [inspect_cmd, extract_cmd]
