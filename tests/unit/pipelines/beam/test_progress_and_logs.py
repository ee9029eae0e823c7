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
    assert "input read; the global stages and writing follow" in done
    assert "left" not in describe(Snapshot({"read": 5}, 0), 1.0, total_bytes=None)  # size unknown: no estimate


def test_the_line_names_the_stage_keeps_the_reading_rate_and_never_goes_quiet() -> None:
    """Observed: in the second half of a curate the line stayed at "kept 0 · rejected 0"
    with a falling docs/s and no stage name."""
    from afm.pipelines.beam.progress import stage_label

    dedup, decontam = stage_label(1, "dedup"), stage_label(2, "decontaminate")
    reading = describe(Snapshot({"read": 500, dedup: 480}, 5_000), 10.0, total_bytes=10_000)
    assert reading.startswith("reading + per-document stages")
    in_dedup = describe(Snapshot({"read": 1000, dedup: 960}, 10_000), 300.0, total_bytes=10_000,
                        read_rate=50.0, quiet_s=200.0)
    assert in_dedup.startswith("stage dedup") and "50.0 docs/s read" in in_dedup  # not 1000 / 300
    assert "stage dedup working: no count moved for 0:03:20" in in_dedup
    assert describe(Snapshot({"read": 1000, dedup: 960, decontam: 900}, 10_000), 320.0,
                    total_bytes=10_000).startswith("stage decontaminate")
    assert describe(Snapshot({"read": 1000, dedup: 960, decontam: 900, "kept": 10}, 10_000), 330.0,
                    total_bytes=10_000).startswith("writing")
    assert "no count moved" not in describe(Snapshot({"read": 5}, 0), 1.0, total_bytes=None, quiet_s=3.0)
    # A per-document stage's rejects reach the writer while reading: still reading, not writing.
    assert describe(Snapshot({"read": 500, "rejected": 40}, 5_000), 10.0,
                    total_bytes=10_000).startswith("reading + per-document stages")
    assert describe(Snapshot({"read": 1000, dedup: 960, "rejected": 40}, 10_000), 300.0,
                    total_bytes=10_000).startswith("stage dedup")
    # Everything rejected before any global stage: the rejects are what is being written.
    assert describe(Snapshot({"read": 1000, "rejected": 1000}, 10_000), 300.0,
                    total_bytes=10_000).startswith("writing")


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
