"""``--source code`` and ``--source math`` on the local runner, and ``--dry-run``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
MIT = ("MIT License\n\nCopyright (c) 2024 Example\n\nPermission is hereby granted, free of "
       "charge, to any person obtaining a copy of this software and associated documentation "
       "files (the \"Software\"), to deal in the Software without restriction, including "
       "without limitation the rights to use, copy, modify, merge, publish, distribute, "
       "sublicense, and/or sell copies of the Software.\n")
CODE = '''"""Small geometry helpers."""


def area(width: float, height: float) -> float:
    """Area of a rectangle."""
    return width * height


def perimeter(width: float, height: float) -> float:
    """Perimeter of a rectangle."""
    return 2 * (width + height)
'''


def _ids(files: list[dict]) -> list[dict]:
    rows: list[dict] = []
    for f in files:
        rows.extend(pq.read_table(f["path"], columns=["url", "id"]).to_pylist())
    return rows


def test_code_source(tmp_path: Path) -> None:
    from afm.pipelines.curate.pipeline import run_curate

    repos = tmp_path / "repos"
    licensed = repos / "licensed"
    licensed.mkdir(parents=True)
    (licensed / "LICENSE").write_text(MIT)
    (licensed / "geometry.py").write_text(CODE)
    (licensed / "geometry_copy.py").write_text(CODE)  # exact duplicate file
    unlicensed = repos / "unlicensed"
    unlicensed.mkdir()
    (unlicensed / "tool.py").write_text(CODE.replace("rectangle", "box"))
    cfg = {"decontaminate": {"enabled": False}}  # covered by the web test
    manifest = run_curate([str(repos)], tmp_path / "out", config=cfg, source="code",
                          pipeline_args=LOCAL)
    assert manifest["accounting"]["ok"] and manifest["totals"]["in"] == 3
    kept = _ids(manifest["outputs"]["documents"])
    assert len(kept) == 1 and kept[0]["url"].startswith("licensed/geometry")
    reasons = {f["stage"]: f["reasons"] for f in manifest["funnel"]}
    assert reasons["code"] == {"code_license_missing": 1}
    if manifest["funnel"][[f["stage"] for f in manifest["funnel"]].index("dedup")]["status"] == "ready":
        assert sum(reasons["dedup"].values()) == 1


def test_math_source(tmp_path: Path) -> None:
    from afm.pipelines.curate.pipeline import run_curate

    docs = [
        {"url": "http://m.test/1", "text": (
            "We prove that for every integer $n \\geq 1$ the sum satisfies "
            "$\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}$. The base case $n = 1$ holds since "
            "$1 = \\frac{1 \\cdot 2}{2}$. Assume it holds for $n$; adding $n+1$ to both "
            "sides gives $\\frac{n(n+1)}{2} + (n+1) = \\frac{(n+1)(n+2)}{2}$, which is the "
            "claim for $n+1$. By induction the formula holds for all $n \\in \\mathbb{N}$.")},
        {"url": "http://m.test/2", "text": (
            "The bakery on the corner opens at seven every morning and sells fresh bread, "
            "pastries and coffee to people on their way to work. On Saturdays there is a "
            "queue outside before the doors open, and the croissants are usually gone by "
            "nine o'clock.")},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    cfg = {"decontaminate": {"enabled": False}}  # covered by the web test
    manifest = run_curate([str(path)], tmp_path / "out", config=cfg, source="math",
                          pipeline_args=LOCAL)
    assert manifest["accounting"]["ok"] and manifest["totals"]["in"] == 2
    math_stage = next(f for f in manifest["funnel"] if f["stage"] == "math")
    assert math_stage["reasons"] == {"math_no_evidence": 1}
    kept = _ids(manifest["outputs"]["documents"])
    assert [k["url"] for k in kept] == ["http://m.test/1"]


def test_dry_run_dataflow(tmp_path: Path) -> None:
    """A complete Dataflow submission, checked and its graph built, nothing submitted."""
    from click.testing import CliRunner

    from afm.app.commands.pipelines.curate import curate_command

    dataflow = ["--runner", "DataflowRunner", "--dry-run", "--project=my-project-123",
                "--region=us-central1", "--temp_location=gs://afm-bucket/tmp",
                "--sdk_container_image=us-docker.pkg.dev/my-project-123/afm/curate:1"]
    io_args = ["--input", "gs://afm-bucket/crawl/part-00000.warc.gz",
               "--output", "gs://afm-bucket/corpus"]
    result = CliRunner().invoke(curate_command, [
        *io_args, "--decontam-index", "gs://afm-bucket/decontam-index", *dataflow])
    assert result.exit_code == 0, result.output
    assert "dry run ok" in result.output
    # An index built on the fly lands on this machine's disk, which no Dataflow worker
    # reads: refused before submission, with the way out.
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"decontaminate: {{params: {{benchmarks: demo, cache_dir: {tmp_path / 'dc'}}}}}\n")
    result = CliRunner().invoke(curate_command, [*io_args, "--config", str(cfg), *dataflow])
    assert result.exit_code == 1 and "decontamination index" in result.output
    assert "gs://" in result.output and "Traceback" not in result.output


def test_quality_top_fraction(tmp_path: Path) -> None:
    """``quality_model.params.top_fraction``: a corpus-wide cut keeps the best-scored half."""
    from afm.pipelines.curate.pipeline import run_curate

    prose = [
        "The committee reviewed the budget in detail and agreed to fund the new library wing. Residents "
        "had asked for it for years, and the plan for its use was clear: a reading room for children, a "
        "quiet floor for study and a small hall for talks. Work will begin in the spring, and the wing "
        "should open before the end of next year. The old building stays open while the builders work, "
        "with the entrance moved to the side street for a few months.",
        "Researchers measured the river's temperature every hour for a year and found that shade from "
        "restored trees lowered summer peaks by almost two degrees. That matters for fish such as trout, "
        "which suffer when the water grows warm. The team now plans to plant more trees along the banks "
        "upstream, where the water is shallow and heats fastest, and to measure again in five years to "
        "see how much cooler the river has become.",
        "The museum's new exhibition traces the history of printing, from carved wooden blocks to the "
        "presses that made newspapers affordable for ordinary families. Visitors can set a line of type "
        "by hand and print it on an old press, and a room of early newspapers shows how the news of a "
        "town reached its readers a century ago. The exhibition runs until the end of the summer.",
        "The ferry to the island runs four times a day in summer and twice a day in winter, weather "
        "permitting. Crossings take about forty minutes, and bicycles travel free on every sailing. "
        "Groups of more than ten people should book ahead, because the passenger deck is small, and "
        "dogs are welcome on the open deck as long as they stay on a lead for the whole crossing.",
    ]
    spam = [" ".join([f"click here {w} best price buy now buy now free free free deal today."] * 5)
            for w in ("cheap", "win", "prize")]
    # four articles and three spam pages: the median score is an article's (the model gives
    # every spam page the same floor score, and ties at the cut are kept)
    texts = [prose[0], prose[1], spam[0], spam[1], prose[2], spam[2], prose[3]]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"url": f"http://q.test/{i}", "text": t,
                                        "page_type": "article" if i in (0, 1, 4, 6) else "spam"}) + "\n"
                            for i, t in enumerate(texts)))
    off = {"enabled": False}
    cfg = {name: off for name in ("language", "safety", "pii", "dedup", "quality",
                                  "decontaminate")}
    cfg["quality_model"] = {"params": {"top_fraction": 0.5}}
    manifest = run_curate([str(path)], tmp_path / "out", config=cfg, pipeline_args=LOCAL)
    assert manifest["accounting"]["ok"]
    kept = pq.read_table(manifest["outputs"]["documents"][0]["path"]).to_pylist()
    rejected = pq.read_table(manifest["outputs"]["rejects"][0]["path"]).to_pylist()
    assert len(kept) == 4 and len(rejected) == 3
    assert {r["reason"] for r in rejected} == {"quality_model_top_fraction"}
    assert min(d["quality_score"] for d in kept) >= max(r["quality_score"] for r in rejected)
    # the input's page type is counted per stage (report.html's view by kind), never written
    by_type = manifest["by_kind"]["page_type"]
    assert by_type["article"]["quality_model"] == {"kept": 4, "rejected": 0}
    assert by_type["spam"]["quality_model"] == {"kept": 0, "rejected": 3}
    assert "page_type" not in kept[0] and "page_type" not in rejected[0]


def test_pages_without_extractor_are_rejected(planted_warc: Path, tmp_path: Path) -> None:
    """With extraction switched off every crawl page is an extract reject (never a
    text-less document), and the accounting still holds."""
    from afm.pipelines.curate.pipeline import run_curate

    off = {"enabled": False}
    cfg = {name: off for name in ("extract", "language", "safety", "pii", "dedup", "quality",
                                  "quality_model", "decontaminate")}
    manifest = run_curate([str(planted_warc)], tmp_path / "out", config=cfg, pipeline_args=LOCAL,
                          allow_empty=True)  # nothing kept: refused unless asked for (afm.outputs)
    assert manifest["accounting"]["ok"] and manifest["totals"]["kept"] == 0
    extract = next(f for f in manifest["funnel"] if f["stage"] == "extract")
    assert extract["dropped"] == manifest["totals"]["in"]
    assert extract["reasons"] == {"extract_disabled": manifest["totals"]["in"]}
    assert manifest["outputs"]["documents"] == []
