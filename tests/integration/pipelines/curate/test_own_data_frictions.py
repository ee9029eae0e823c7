"""Issue 44, the own-data path as a new user meets it: curate says which stages took the
documents and what relaxes each, and its summary and report leave out what does not
apply to the input (extraction of document files, robots.txt snapshots for documents
without a URL); an input folder of unsupported files says what would have been read."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from afm.app.commands.pipelines.curate import curate_command

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _docs(path: Path, with_url: bool) -> Path:
    rows = []
    for i in range(6):  # English prose, kept by the language stage
        rows.append({"id": f"en{i}", "text": f"Walk {i} along the river took us past the old mill. "
                     "The water was high after the rain and the path was muddy. " * 4})
    for i in range(3):  # French, rejected by the language stage (keep: [en])
        rows.append({"id": f"fr{i}", "text": f"Promenade {i} le long de la rivière, après la pluie, "
                     "le chemin était boueux et l'eau très haute. " * 4})
    if with_url:
        for r in rows:
            r["url"] = f"https://site.test/{r['id']}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(tmp_path: Path, src: Path, name: str) -> tuple[dict, str, str]:
    out = tmp_path / name
    result = CliRunner().invoke(curate_command, [
        "--input", str(src), "--output", str(out), "--set", 'stages=["optout", "extract", "language"]',
        *LOCAL])
    assert result.exit_code == 0, result.output
    return (json.loads((out / "manifest.json").read_text()), result.output,
            (out / "report.html").read_text())


def test_summary_names_the_stage_that_rejected_most_and_its_setting(tmp_path: Path) -> None:
    manifest, output, report = _run(tmp_path, _docs(tmp_path / "docs.jsonl", with_url=False), "out")
    assert manifest["totals"] == {"in": 9, "kept": 6, "rejected": 3}
    most = manifest["rejected_most"]
    assert [m["stage"] for m in most] == ["language"] and most[0]["top_reason"] == "language_not_kept"
    assert "language.params.keep" in most[0]["setting"]
    flat = " ".join(output.split())
    assert "rejected most" in flat and "language: 3 rejected" in flat and "language.params.keep" in flat
    assert "Rejected most, and what keeps more" in report and "language.params.keep" in report
    # Document files have no pages to extract, and these documents no URL to check a
    # robots.txt snapshot for: neither is shown as if it had run.
    assert [f["stage"] for f in manifest["funnel"] if not f["applies"]] == ["extract"]
    assert "<td>extract</td>" not in report and "Not applicable to this input" in report
    assert manifest["warnings"] == [] and "robots.txt" not in flat
    assert "│ extract" not in output
    # What each stage cost, measured in the stage's own code (CPU, not wall time).
    costs = manifest["costs"]
    by_stage = {s["stage"]: s for s in costs["stages"]}
    assert {"read", "language", "write"} <= set(by_stage) and by_stage["language"]["documents"] == 9
    assert all(s["cpu_s"] > 0 for s in costs["stages"]) and costs["peak_memory_mb"]["launcher"] > 0
    # Process CPU comes from the kernel's per-process counters, in clock ticks (10 ms): two
    # ticks of slack against the stages' nanosecond thread clocks.
    assert costs["process_cpu_s"] + 0.02 >= costs["stages_cpu_s"] and "Cost per stage" in report


def test_the_snapshot_warning_stays_when_documents_have_urls(tmp_path: Path) -> None:
    manifest, output, _ = _run(tmp_path, _docs(tmp_path / "docs.jsonl", with_url=True), "out")
    assert any("robots.txt" in w for w in manifest["warnings"])


def test_a_folder_of_html_says_what_would_be_read(tmp_path: Path) -> None:
    folder = tmp_path / "html"
    folder.mkdir()
    for i in range(3):
        (folder / f"p{i}.html").write_text("<html><body>hi</body></html>")
    result = CliRunner().invoke(curate_command, ["--input", str(folder), "--output", str(tmp_path / "out"),
                                                 "--set", 'stages=["extract"]', *LOCAL])
    assert result.exit_code != 0 and "Traceback" not in result.output
    flat = " ".join(result.output.split())
    assert ".html (3)" in flat and ".warc.gz" in flat and ".jsonl" in flat and "afm crawl" in flat


def test_the_curate_report_fits_a_laptop_window(tmp_path: Path) -> None:
    from tests.browser import page_width

    _run(tmp_path, _docs(tmp_path / "docs.jsonl", with_url=True), "out")
    assert page_width(tmp_path / "out" / "report.html", 1280) <= 1280
