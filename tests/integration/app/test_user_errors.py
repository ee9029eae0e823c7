"""Numbers that mean nothing, data that cannot be used and damaged checkpoints are one
``Error:`` line before any work (never a traceback, never exit 0 with a useless output):
issue 27's list, case by case, through the ``afm`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from tests.paths import CHAT_TOKENIZER

CHAT = CHAT_TOKENIZER


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
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer

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
    from afm.sandbox import Boundary, run

    monkeypatch.setitem(run.kernel_boundary.results, (), Boundary("weak", "host", "unshare (util-linux) not found"))
    monkeypatch.setattr(run, "_ACCEPT_WEAK", [False])


def test_code_evaluation_refuses_a_host_that_cannot_isolate(model: Path, host_without_namespaces) -> None:
    one_line_error(afm("eval", "--checkpoint", model, "--tasks", "humaneval"),
                   "cannot isolate model-written programs", "unshare (util-linux) not found",
                   "--allow-weak-sandbox")
    one_line_error(afm("synth", "code", "--output", "unused", "--generator", "openai:http://127.0.0.1:9/v1",
                       "--model", "m"), "cannot isolate", "--allow-weak-sandbox")


# -- issue 40: impossible numbers, empty inputs, duplicate keys, the ten tracebacks ------------

@pytest.mark.parametrize("setting, needle", [
    ("rope_base=nan", "rope_base"), ("rope_base=inf", "rope_base"), ("norm_eps=nan", "norm_eps"),
    ("norm_eps=-1", "norm_eps must be a finite number in (0, 1)"), ("dim=1e20", "dim: expected an integer"),
    ("dim=100000000000", "dim must be from 1 to"), ("vocab_size=0", "vocab_size must be from 1"),
    ("dim=2000000000", "more than the"),  # 4e12 parameters: 16 TB, more than any host holds
])
def test_model_init_refuses_an_impossible_model(setting: str, needle: str, tmp_path: Path) -> None:
    one_line_error(afm("model", "init", "--config", "tiny", "--out", tmp_path / "m", "--set", setting), needle)
    assert not (tmp_path / "m" / "config.json").exists()


@pytest.mark.parametrize("field, value", [("rope_base", float("nan")), ("norm_eps", -1.0), ("dim", 0),
                                          ("n_layers", 2.5)])
def test_a_checkpoint_with_an_impossible_config_is_not_loaded(field: str, value, model: Path, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(model, bad)
    meta = json.loads((bad / "config.json").read_text())
    meta["config"][field] = value
    (bad / "config.json").write_text(json.dumps(meta))
    for args in (["score", "--checkpoint", bad, "--tokens", "1 2 3"],
                 ["eval", "--checkpoint", bad, "--tokenizer", CHAT, "--tasks", "afm-demo", "--limit", "2",
                  "--output", tmp_path / "r.json"]):
        one_line_error(afm(*args), "not a valid model config", field)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("setting, needle", [
    ("optimizer.learning_rate=-1", "optimizer.learning_rate must be a finite number > 0"),
    ("optimizer.learning_rate=0", "optimizer.learning_rate must be a finite number > 0"),
    ("optimizer.b2=1.5", "optimizer.b2"), ("data.seq_len=0", "data.seq_len must be a whole number >= 2"),
    ("data.global_batch_size=0", "data.global_batch_size"), ("total_steps=0", "total_steps"),
    ("schedule.warmup_steps=-5", "schedule.warmup_steps"), ("checkpoint.every_steps=0", "checkpoint.every_steps"),
    ("model_overrides.rope_base=.nan", "model_overrides.rope_base"),
    ("model_overrides.norm_eps=-1", "norm_eps must be a finite number in (0, 1)"),
    ("model_overrides.dim=1.5", "model_overrides.dim"), ("model_overrides.colour=red", "not a model config field"),
    ("seed=-1", "seed must be a whole number"),
])
def test_training_numbers_have_their_ranges(setting: str, needle: str, shards, tmp_path: Path) -> None:
    result = afm("train", "--config", "tiny-core", "--workdir", tmp_path / "run", "--data", shards["ok"],
                 "--set", setting, "--steps", "1")
    one_line_error(result, needle)
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "model").exists()


def test_rl_iterations_must_be_positive(model: Path, tmp_path: Path) -> None:
    result = afm("rl", "mdloo", "--workdir", tmp_path / "rl", "--policy", model, "--iterations", "-1")
    assert result.exit_code == 2 and "-1 is not in the range x>=1" in result.output
    result = afm("rl", "mdloo", "--workdir", tmp_path / "rl", "--policy", model, "--reward", "task:arith",
                 "--set", "task_options.iterations=-1")
    one_line_error(result, "task_options.iterations must be >= 0")
    assert not (tmp_path / "rl" / "model").exists()


def test_duplicate_yaml_keys_name_the_key_and_line(shards, tmp_path: Path) -> None:
    config = tmp_path / "train.yaml"
    config.write_text("base: tiny-core\noptimizer:\n  learning_rate: 0.01\n  learning_rate: 0.5\n")
    one_line_error(afm("train", "--config", config, "--workdir", tmp_path / "run", "--data", shards["ok"]),
                   "line 4: duplicate key 'learning_rate' (first given at line 3)")
    curate = tmp_path / "curate.yaml"
    curate.write_text("source: web\noutput:\n  shard_target_mb: 8\nsource: code\n")
    one_line_error(afm("curate", "-i", tmp_path, "-o", tmp_path / "out", "-c", curate),
                   "line 4: duplicate key 'source' (first given at line 1)")


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, Path]:
    """A JSONL of documents, an empty input, a Parquet file with no rows, and a truncated one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("documents")
    docs = [{"id": str(i), "text": f"Document {i} is about the weather over the sea and the hills. " * 20}
            for i in range(30)]
    (root / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "empty").mkdir()
    (root / "empty" / "none.jsonl").write_text("")
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
                   root / "no-rows.parquet")
    pq.write_table(pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]}), root / "full.parquet")
    (root / "truncated").mkdir()
    raw = (root / "full.parquet").read_bytes()
    (root / "truncated" / "cut.parquet").write_bytes(raw[: len(raw) // 2])
    (root / "no-decontam.yaml").write_text("decontaminate: {enabled: false}\n")
    return {"docs": root / "docs.jsonl", "empty": root / "empty", "no_rows": root / "no-rows.parquet",
            "truncated": root / "truncated", "config": root / "no-decontam.yaml"}


def test_inputs_that_yield_no_document_are_an_error_unless_allowed(documents, tmp_path: Path) -> None:
    """An empty input (curate) and a truncated one (tokenize) stop with one line and no
    _SUCCESS; with --allow-empty the unreadable file is a recorded rejection."""
    out = tmp_path / "curated"
    one_line_error(afm("curate", "-i", documents["empty"], "-o", out, "-c", documents["config"]),
                   "empty (0 bytes)", "one JSON object per line")  # before the pipeline starts
    assert not (out / "_SUCCESS").exists()
    tokens = tmp_path / "tokens"
    one_line_error(afm("tokenize", "--input", documents["truncated"], "--tokenizer", CHAT, "--output", tokens),
                   "cut.parquet", "not a readable PARQUET file", "expected a Parquet file")  # before the pipeline starts
    assert not (tokens / "_SUCCESS").exists()
    allowed = afm("curate", "-i", documents["docs"], "-o", out, "-c", documents["config"], "--allow-empty",
                  "--set", "stages=[quality]", "--set", "quality.params.min_doc_words=90000")
    assert allowed.exit_code == 0, allowed.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"] == {"in": 30, "kept": 0, "rejected": 30} and (out / "_SUCCESS").exists()
    # the one rule: all rejected is refused like nothing read, and the next step names the empty run
    refused = tmp_path / "refused"
    one_line_error(afm("curate", "-i", documents["docs"], "-o", refused, "-c", documents["config"],
                       "--set", "stages=[quality]", "--set", "quality.params.min_doc_words=90000"),
                   "curate kept no document", "30 rejected", "--allow-empty")
    assert not (refused / "_SUCCESS").exists()
    one_line_error(afm("tokenize", "--input", out, "--tokenizer", CHAT, "--output", tokens),
                   "holds no document", "`afm curate` kept none of the 30")


@pytest.mark.parametrize("case", [
    "generate --seed", "model init --seed", "model init --set dim=1e20", "train rope_base=nan",
    "tokenizer --vocab-size", "tokenizer empty parquet", "tokenizer truncated parquet", "curate broken yaml",
    "generate --tokenizer file", "eval --output directory",
])
def test_the_ten_tracebacks_are_one_line_each(case: str, model: Path, shards, documents, tmp_path: Path) -> None:
    """Issue 40's list, each as a new user would type it."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("stages:\n  - name: [unclosed\n")
    (tmp_path / "out-dir").mkdir()
    args, needles = {
        "generate --seed": (["generate", "--checkpoint", model, "--tokenizer", CHAT, "--prompt", "hi", "--seed",
                             str(2**70)], ["--seed", "4294967295"]),
        "model init --seed": (["model", "init", "--config", "tiny", "--out", tmp_path / "m", "--seed", str(2**70)],
                              ["--seed"]),
        "model init --set dim=1e20": (["model", "init", "--config", "tiny", "--out", tmp_path / "m", "--set",
                                       "dim=1e20"], ["dim"]),
        "train rope_base=nan": (["train", "--config", "tiny-core", "--workdir", tmp_path / "run", "--data", shards["ok"],
                                 "--set", "model_overrides.rope_base=nan", "--steps", "1"], ["rope_base"]),
        "tokenizer --vocab-size": (["tokenizer", "train", "--input", documents["docs"], "--vocab-size", "99999999999",
                                    "--out", tmp_path / "tok"], ["--vocab-size"]),
        "tokenizer empty parquet": (["tokenizer", "train", "--input", documents["no_rows"], "--vocab-size", "300",
                                     "--out", tmp_path / "tok"], ["no-rows.parquet", "of no rows"]),
        "tokenizer truncated parquet": (["tokenizer", "train", "--input", documents["truncated"], "--vocab-size", "300",
                                         "--out", tmp_path / "tok"], ["cut.parquet", "not a readable PARQUET file"]),
        "curate broken yaml": (["curate", "-i", documents["docs"], "-o", tmp_path / "c", "-c", broken],
                               ["broken.yaml: line 3", "not valid YAML"]),
        "generate --tokenizer file": (["generate", "--checkpoint", model, "--tokenizer", documents["docs"],
                                       "--prompt", "hi"], ["not a SentencePiece tokenizer model"]),
        "eval --output directory": (["eval", "--checkpoint", model, "--tokenizer", CHAT, "--tasks", "afm-demo",
                                     "--limit", "2", "--output", tmp_path / "out-dir"], ["is a directory"]),
    }[case]
    one_line_error(afm(*args), *needles)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]
