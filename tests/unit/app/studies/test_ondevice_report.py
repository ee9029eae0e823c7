"""`afm prune report`: the ablation table reads each run's last held-out evaluation and its
`afm eval` file, skips runs that are absent, and fails clearly when there are none."""

from __future__ import annotations

import json

from click.testing import CliRunner

from afm.app.cli import main


def _run(root, name, evals):
    run = root / name
    run.mkdir(parents=True)
    rows = [{"step": s, "loss": 5.0} for s in (10, 20)]  # training rows carry no held-out keys
    rows += [{"step": s, "eval/heldout/loss": loss, "eval/heldout/accuracy": acc} for s, loss, acc in evals]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_table_and_plot_from_runs_and_eval_files(tmp_path):
    runs, evals, out = tmp_path / "runs", tmp_path / "eval", tmp_path / "out"
    _run(runs, "baseline", [(10, 5.5, 0.10), (20, 5.0, 0.12)])
    _run(runs, "prune-only", [(10, 4.5, 0.18), (20, 4.25, 0.2)])
    evals.mkdir()
    (evals / "baseline.json").write_text(json.dumps({
        "tasks": {"arc_easy": {"primary": "acc", "metrics": {"acc": {"value": 0.25}}},
                  "piqa": {"primary": "acc", "metrics": {"acc": {"value": 0.5}}}},
        "perplexity": {"nll": 5.125}}))
    result = CliRunner().invoke(main, ["prune", "report", "--runs", str(runs), "--eval", str(evals), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = (out / "ablation.md").read_text().splitlines()
    assert lines[0].split(" | ")[5:] == ["held-out loss", "held-out top-1 acc", "held-out NLL/token", "arc_easy",
                                         "piqa", "task mean |"]
    assert lines[2] == "| Baseline | scratch | labels | 1x | 20 | 5.0000 | 0.1200 | 5.1250 | 0.250 | 0.500 | 0.375 |"
    assert lines[3].startswith("| Prune | pruned teacher | labels | 1x | 20 | 4.2500 | 0.2000 | - | - | - | - |")
    assert len(lines) == 4 and (out / "ablation.png").stat().st_size > 0

    result = CliRunner().invoke(main, ["prune", "report", "--runs", str(tmp_path / "none"), "--eval", str(evals),
                                       "--out", str(out)])
    assert result.exit_code != 0 and "no ablation runs" in result.output and "Traceback" not in result.output


def test_control_rows_follow_prune_with_the_mean_of_the_random_seeds(tmp_path):
    runs, evals, out = tmp_path / "runs", tmp_path / "eval", tmp_path / "out"
    _run(runs, "baseline", [(20, 5.0, 0.12)])
    _run(runs, "prune-only", [(20, 4.0, 0.20)])
    _run(runs, "prune-magnitude", [(20, 4.5, 0.16)])
    _run(runs, "prune-random-1", [(20, 4.25, 0.18)])
    _run(runs, "prune-random-0", [(20, 4.75, 0.14)])
    (runs / "prune-random-x").mkdir()  # not a seed: ignored
    evals.mkdir()
    for name, nll in (("prune-random-0", 5.0), ("prune-random-1", 4.5)):
        (evals / f"{name}.json").write_text(json.dumps({"perplexity": {"nll": nll}}))
    starts = tmp_path / "eval-start"  # afm eval of the pruned checkpoints, before training
    starts.mkdir()
    for name, nll in (("pruned", 4.5), ("pruned-random-0", 6.0), ("pruned-random-1", 5.0), ("pruned-magnitude", 5.5)):
        (starts / f"{name}.json").write_text(json.dumps({"perplexity": {"nll": nll}}))
    result = CliRunner().invoke(main, ["prune", "report", "--runs", str(runs), "--eval", str(evals),
                                       "--start-eval", str(starts), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [line.split(" | ") for line in (out / "ablation.md").read_text().splitlines()[2:]]
    assert [r[0] for r in rows] == ["| Baseline", "| Prune", "| Prune: random units (seed 0)",
                                    "| Prune: random units (seed 1)", "| Prune: random units (mean of 2 seeds)",
                                    "| Prune: magnitude units"]
    assert [r[5] for r in rows] == ["-", "4.5000", "6.0000", "5.0000", "5.5000", "5.5000"]  # start's NLL
    assert rows[4][6:9] == ["4.5000", "0.1600", "4.7500"]
    assert rows[5][6:9] == ["4.5000", "0.1600", "-"]
