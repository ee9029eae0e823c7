"""Issue 44: the progress line of local data runs, and where a cluster job is watched."""

from __future__ import annotations

from pathlib import Path

from afm.pipelines.beam.progress import ProgressFile, Snapshot, describe, read_progress


def test_counts_from_every_worker_file_add_up(tmp_path: Path) -> None:
    a, b = ProgressFile(str(tmp_path), "read"), ProgressFile(str(tmp_path), "kept")
    for _ in range(5):
        a.add("read")
    a.bytes_done = 1000
    a.publish()
    b.add("kept", 3)
    b.publish()
    (tmp_path / "half-written.json.tmp").write_text("{")  # a publish in progress is ignored
    snap = read_progress(str(tmp_path))
    assert snap.counts == {"read": 5, "kept": 3} and snap.bytes == 1000


def test_the_line_says_counts_rate_elapsed_and_what_is_left() -> None:
    line = describe(Snapshot({"read": 500, "kept": 0, "rejected": 20}, 2_500), 10.0, total_bytes=10_000)
    assert "read 500" in line and "rejected 20" in line and "50.0 docs/s" in line and "0:00:10 elapsed" in line
    assert "25% of the input, ~0:00:30 left to read" in line
    done = describe(Snapshot({"read": 2000}, 10_000), 40.0, total_bytes=10_000)
    assert "input read; dedup, decontamination and writing follow" in done
    assert "left" not in describe(Snapshot({"read": 5}, 0), 1.0, total_bytes=None)  # size unknown: no estimate


def test_a_cluster_job_says_its_id_and_where_to_watch_it() -> None:
    from afm.pipelines.beam.runners import build_options, watch_hint

    class Result:
        def job_id(self) -> str:
            return "2026-01-01_00_00_00-123"

    options = build_options("DataflowRunner", ["--project=p1", "--region=europe-west4"])
    hint = watch_hint("DataflowRunner", Result(), options)
    assert "2026-01-01_00_00_00-123" in hint and "europe-west4" in hint and "project=p1" in hint
    flink = build_options("FlinkRunner", ["--flink_master=flink:8081"])
    assert "http://flink:8081" in watch_hint("FlinkRunner", type("R", (), {"_job_id": "j7"})(), flink)
