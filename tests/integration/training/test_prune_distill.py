"""The on-device start end to end through the commands: teacher -> `afm prune learn` ->
`afm prune apply` -> distilled students (teacher on the fly, and precomputed targets from
`afm distill targets`), plus the user errors of each command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from afm.training.compress.pruning import SHAPE_FIELDS
from afm.training.core.metrics import read_metrics


def _afm(*args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    return result.output


@pytest.fixture(scope="module")
def flow(tmp_path_factory, token_shards):
    root = tmp_path_factory.mktemp("ondevice")
    data = [arg for shard in token_shards for arg in ("--data", shard)]
    teacher, prune, pruned = root / "teacher", root / "prune", root / "pruned"
    _afm("train", "--config", "tiny-teacher-core", "--workdir", str(teacher), *data, "--steps", "6",
         "--set", "total_steps=6")
    _afm("prune", "learn", "--teacher", str(teacher), "--target-ffn-dim", "192", "--workdir", str(prune), *data,
         "--heldout", token_shards[0], "--set", "total_steps=6", "--set", "eval.every_steps=3", "--set", "log_every=1")
    out = _afm("prune", "apply", "--run", str(prune), "--out", str(pruned))
    assert "576 -> 192" in out
    return root, data, teacher, prune, pruned


def test_prune_learn_logs_masks_and_apply_writes_the_smaller_model(flow):
    _, _, _, prune, pruned = flow
    rows = read_metrics(prune)
    entropy = [r["mask_entropy"] for r in rows if "mask_entropy" in r]
    assert len(entropy) == 6 and entropy[-1] < entropy[0]
    evals = [r for r in rows if "eval/prune/overlap_prev" in r]
    assert evals and 0.0 <= evals[-1]["eval/prune/overlap_prev"] <= 1.0
    assert "eval/heldout/loss" in rows[-1]
    masks = [json.loads(line) for line in (prune / "prune-masks.jsonl").read_text().splitlines()]
    assert [m["step"] for m in masks] == [3, 6] and all(len(k) == 192 for k in masks[-1]["kept"])
    config = json.loads((pruned / "config.json").read_text())["config"]
    assert config["ffn_dim"] == 192 and config["dim"] == 64
    record = json.loads((pruned / "prune.json").read_text())
    assert record["kept"] == masks[-1]["kept"]  # the hard mask of the last step


def test_controls_prune_the_teacher_workdir_into_the_same_checkpoint(flow):
    """afm prune apply --method random|magnitude on the teacher run (a training workdir):
    the same kind of checkpoint as the learned masks', which afm train --init-from takes."""
    root, data, teacher, _, pruned = flow
    for method, extra in (("random", ["--seed", "3"]), ("magnitude", [])):
        out = _afm("prune", "apply", "--method", method, *extra, "--teacher", str(teacher), "--target-ffn-dim", "192",
                   "--out", str(root / f"pruned-{method}"))
        assert "576 -> 192" in out
        config = json.loads((root / f"pruned-{method}" / "config.json").read_text())["config"]
        learned = json.loads((pruned / "config.json").read_text())["config"]
        assert {k: config[k] for k in SHAPE_FIELDS} == {k: learned[k] for k in SHAPE_FIELDS} and config["ffn_dim"] == 192
        record = json.loads((root / f"pruned-{method}" / "prune.json").read_text())
        assert record["method"] == method and [len(k) for k in record["kept"]] == [192, 192]
    _afm("train", "--config", "tiny-core", "--workdir", str(root / "from-random"), *data, "--init-from",
         str(root / "pruned-random"), "--steps", "1", "--set", "total_steps=1")


@pytest.mark.slow  # the task and both target sources are unit-tested; `make demo` runs this flow
def test_students_start_from_the_pruned_model_and_distil(flow, token_shards):
    root, data, teacher, _, pruned = flow
    out = _afm("train", "--config", "tiny-distill-core", "--workdir", str(root / "otf"), *data, "--init-from",
               str(pruned), "--steps", "2", "--set", f"task_options.teacher={teacher}")
    assert "parameters of" in out and "frozen" in out
    targets = root / "targets"
    out = _afm("distill", "targets", "--teacher", str(teacher), *data, "--out", str(targets))
    assert "window" in out and (targets / "_SUCCESS").exists()
    _afm("train", "--config", "tiny-distill-core", "--workdir", str(root / "pre"), "--data", str(targets),
         "--init-from", str(pruned), "--steps", "2")
    rows = read_metrics(root / "pre")
    assert rows[-1]["teacher_agreement"] >= 0 and "label_loss" in rows[-1]


def test_user_errors_are_one_line(flow, token_shards):
    root, data, teacher, prune, pruned = flow
    out = _afm("prune", "apply", "--run", str(teacher), "--out", str(root / "x"), ok=False)
    assert "not by a pruning run" in out
    out = _afm("prune", "apply", "--run", str(prune), "--out", str(pruned), ok=False)
    assert "exists" in out
    out = _afm("prune", "learn", "--teacher", str(teacher), "--target-ffn-dim", "576", "--workdir",
               str(root / "y"), *data, ok=False)
    assert "smaller than the teacher" in out
    out = _afm("prune", "learn", "--teacher", str(root / "missing"), "--target-ffn-dim", "64", "--workdir",
               str(root / "z"), *data, ok=False)
    assert "not a model checkpoint" in out or "not found" in out
    finished = root / "finished-targets"  # a finished dataset, without paying for computing one
    finished.mkdir()
    (finished / "_SUCCESS").write_text("")
    out = _afm("distill", "targets", "--teacher", str(teacher), *data, "--out", str(finished), ok=False)
    assert "already holds a finished run" in out
    out = _afm("train", "--config", "tiny-core", "--workdir", str(root / "w"), *data, "--init-from", str(teacher), ok=False)
    assert "prune" in out
