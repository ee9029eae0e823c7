"""Numbers that mean nothing, data that cannot be used and damaged checkpoints are one
``Error:`` line before any work (never a traceback, never exit 0 with a useless output):
issue 27's list, case by case, through the ``afm`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from afm.app.cli import main
from click.testing import CliRunner

CHAT = Path(__file__).resolve().parents[1] / "data" / "chat"


def afm(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, *needles: str) -> str:
    """The run failed with afm's own message (containing ``needles``) and no traceback."""
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output and "Event loop is closed" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert error, result.output
    text = " ".join(result.output.split())
    for needle in needles:
        assert needle in text, (needle, result.output)
    return text


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny dense checkpoint (vocab 512), and token shards of its vocabulary."""
    from afm.model.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from flax import nnx

    root = tmp_path_factory.mktemp("model")
    save_params(Transformer(get_config("tiny"), rngs=nnx.Rngs(params=0)), root / "model")
    return root / "model"


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, Path]:
    from afm.training.data.shards import write_token_shard

    root = tmp_path_factory.mktemp("shards")
    rows = [{"id": str(i), "source": "web", "tokens": [(7 * i + j) % 500 + 3 for j in range(300)]} for i in range(8)]
    write_token_shard(rows, root / "ok" / "shard.parquet")
    big = [{"id": str(i), "source": "web", "tokens": [900 + j for j in range(300)]} for i in range(8)]
    write_token_shard(big, root / "bigvocab" / "shard.parquet")  # from a 1,200-token tokenizer
    return {"ok": root / "ok", "bigvocab": root / "bigvocab"}


@pytest.fixture(scope="module")
def damaged(model: Path, tmp_path_factory) -> Path:
    """The checkpoint with every parameter data file truncated (a copy cut short)."""
    import shutil

    out = tmp_path_factory.mktemp("damaged") / "model"
    shutil.copytree(model, out)
    for f in (out / "params").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(f.read_bytes()[:10])
    return out


@pytest.mark.parametrize("args, needle", [
    (["quantize", "--target-bpw", "nan"], "'nan' is not a finite number"),
    (["quantize", "--target-bpw", "inf"], "not a finite number"),
    (["quantize", "--group-size", "0"], "0 is not >= 1"),
    (["dpo", "--beta", "nan"], "not a finite number"),
    (["generate", "--temperature", "nan"], "not a finite number"),
    (["generate", "--top-p", "0"], "is not > 0"),
    (["adapter", "train", "--alpha", "0"], "0 is not > 0"),
    (["eval", "--limit", "-1"], "is not > 0"),
])
def test_meaningless_numbers_are_refused_before_anything_runs(args: list[str], needle: str, model: Path) -> None:
    result = afm(*args)  # the option fails before any other is even looked at
    assert result.exit_code == 2 and needle in result.output, result.output


def test_quantize_targets_outside_what_palettization_reaches(model: Path, shards, tmp_path: Path) -> None:
    high = afm("quantize", "--checkpoint", model, "--target-bpw", "17", "--calibration", shards["ok"],
               "--out", tmp_path / "q", "--rows", "4", "--seq-len", "64")
    one_line_error(high, "above what palettization gives", "the most it reaches")
    low = afm("quantize", "--checkpoint", model, "--target-bpw", "1", "--calibration", shards["ok"],
              "--out", tmp_path / "q", "--rows", "4", "--seq-len", "64")
    one_line_error(low, "below what this model can reach")
    odd = afm("quantize", "--checkpoint", model, "--group-size", "7", "--calibration", shards["ok"],
              "--out", tmp_path / "q", "--rows", "4", "--seq-len", "64")
    one_line_error(odd, "--group-size 7 divides no projection")
    assert not (tmp_path / "q" / "config.json").exists()


def test_calibration_from_another_tokenizer_is_refused(model: Path, shards, tmp_path: Path) -> None:
    result = afm("quantize", "--checkpoint", model, "--calibration", shards["bigvocab"], "--out", tmp_path / "q",
                 "--rows", "4", "--seq-len", "64")
    one_line_error(result, "outside the model's vocabulary of 512", "another tokenizer")
    assert not (tmp_path / "q" / "config.json").exists()


def test_adapter_rank_above_the_model_width_is_refused(model: Path, shards, tmp_path: Path) -> None:
    result = afm("adapter", "train", "--base", model, "--data", shards["ok"], "--workdir", tmp_path / "run",
                 "--rank", "100000", "--steps", "1")
    one_line_error(result, "LoRA rank 100000 exceeds", "--rank")
    assert not (tmp_path / "run" / "adapter").exists()


def test_nan_in_a_config_override_is_refused(shards, tmp_path: Path) -> None:
    result = afm("train", "--config", "tiny-core", "--workdir", tmp_path / "run", "--data", shards["ok"],
                 "--set", "optimizer.learning_rate=.nan", "--steps", "1")
    one_line_error(result, "optimizer.learning_rate", "finite")


def test_sft_prepare_with_nothing_usable_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "chat.jsonl"
    bad.write_text('{"messages": "not a list"}\nnot json\n{"prompt": 3}\n')
    result = afm("sft", "prepare", "--input", bad, "--name", "chat", "--tokenizer", CHAT, "--output",
                 tmp_path / "out", "--no-decontam")
    one_line_error(result, "no usable conversation", "3 records rejected")
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_a_held_out_file_of_bad_records_stops_before_training(model: Path, tmp_path: Path) -> None:
    good = tmp_path / "train.jsonl"
    good.write_text(json.dumps({"prompt": "2+2?", "chosen": "4", "rejected": "5"}) + "\n")
    bad = tmp_path / "heldout.jsonl"
    bad.write_text('{"prompt": "x"}\nnot json\n')
    for command in (["rm", "train"], ["dpo"]):
        result = afm(*command, "--workdir", tmp_path / command[0], "--init-from", model, "--data", good,
                     "--heldout", bad, "--tokenizer", CHAT, "--steps", "1")
        one_line_error(result, "no usable preference pair in the held-out data")
        assert not (tmp_path / command[0] / "checkpoints").exists()


@pytest.mark.parametrize("command", ["score", "generate", "eval", "quantize", "adapter", "prune"])
def test_a_damaged_checkpoint_is_one_line(command: str, damaged: Path, shards, tmp_path: Path) -> None:
    args = {
        "score": ["score", "--checkpoint", damaged, "--tokens", "1 2 3"],
        "generate": ["generate", "--checkpoint", damaged, "--tokenizer", CHAT, "--prompt", "hi", "--max-new-tokens", "2"],
        "eval": ["eval", "--checkpoint", damaged, "--tokenizer", CHAT, "--tasks", "afm-demo", "--limit", "2"],
        "quantize": ["quantize", "--checkpoint", damaged, "--calibration", shards["ok"], "--out", tmp_path / "q",
                     "--rows", "4", "--seq-len", "64"],
        "adapter": ["adapter", "train", "--base", damaged, "--data", shards["ok"], "--workdir", tmp_path / "a",
                    "--steps", "1"],
        "prune": ["prune", "learn", "--teacher", damaged, "--target-ffn-dim", "32", "--workdir", tmp_path / "p",
                  "--data", shards["ok"], "--steps", "1"],
    }[command]
    one_line_error(afm(*args), str(damaged), "cannot be read, damaged or incomplete")


def test_a_vocabulary_mismatch_at_init_from_is_one_line(model: Path, shards, tmp_path: Path) -> None:
    result = afm("train", "--config", "tiny-core", "--workdir", tmp_path / "run", "--data", shards["ok"],
                 "--init-from", model, "--set", "model_overrides.vocab_size=640", "--steps", "1")
    one_line_error(result, "do not fit this model", "(640, 64)", "(512, 64)", "afm prune apply")


@pytest.fixture
def host_without_namespaces(monkeypatch):
    from afm.sandbox import Boundary, isolation

    monkeypatch.setattr(isolation, "_PROBED", [Boundary("weak", "host", "unshare (util-linux) not found")])
    monkeypatch.setattr(isolation, "_ACCEPT_WEAK", [False])


def test_code_evaluation_refuses_a_host_that_cannot_isolate(model: Path, host_without_namespaces) -> None:
    one_line_error(afm("eval", "--checkpoint", model, "--tasks", "humaneval"),
                   "cannot isolate model-written programs", "unshare (util-linux) not found",
                   "--allow-weak-sandbox")
    one_line_error(afm("synth", "code", "--output", "unused", "--generator", "openai:http://127.0.0.1:9/v1",
                       "--model", "m"), "cannot isolate", "--allow-weak-sandbox")
