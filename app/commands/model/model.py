"""``afm model``, ``afm score``, ``afm generate``, ``afm export``/``import`` and
``afm tokenizer``: the model and tokenizer commands.

Top-level imports stay light (click, stdlib); JAX and SentencePiece load inside commands.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from afm.app.commands.options import NON_NEGATIVE, POSITIVE_INT, PROBABILITY_OPEN, SEED, Number

# ----------------------------------------------------------------------------- model


@click.group(
    "model",
    epilog="""\b
Examples:
  afm model list
  afm model info afm-on-device
  afm model info tiny --seq-len 512
  afm model init --config tiny --out work/ckpt/tiny-init --seed 0
""",
)
def model_group() -> None:
    """Named AFM model configs: sizes, parameter counts, random-init checkpoints."""


@model_group.command("list", epilog="""\b
Examples:
  afm model list
""")
def model_list() -> None:
    """Every named config with its parameter counts (billions)."""
    from afm.console import print_table
    from afm.model.config import CONFIGS, param_counts

    rows = []
    for name, cfg in CONFIGS.items():
        p = param_counts(cfg)
        rows.append([name, cfg.dim, cfg.n_layers, f"{cfg.n_heads}/{cfg.n_kv_heads}", cfg.ffn_dim,
                     cfg.vocab_size, f"{p['non_embedding'] / 1e9:.3f}", f"{p['embedding'] / 1e9:.3f}",
                     f"{p['total'] / 1e9:.3f}"])
    print_table("model configs", ["name", "dim", "layers", "q/kv heads", "ffn", "vocab",
                                  "non-emb B", "emb B", "total B"], rows)


@model_group.command("info", epilog="""\b
Examples:
  afm model info afm-on-device
  afm model info afm-server --seq-len 8192 --json
""")
@click.argument("name")
@click.option("--seq-len", type=int, default=None, help="Sequence length for FLOPs (default: max_seq_len).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON on stdout.")
def model_info(name: str, seq_len: int | None, as_json: bool) -> None:
    """Parameter counts (embedding / non-embedding / total) and training FLOPs per token."""
    from afm.config import print_config
    from afm.console import print_summary
    from afm.model.config import flops_per_token, get_config, param_counts

    try:
        cfg = get_config(name)
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0])) from exc
    p = param_counts(cfg)
    t = seq_len or cfg.max_seq_len
    flops = flops_per_token(cfg, t)
    info = {
        "config": name,
        "embedding_params": p["embedding"],
        "non_embedding_params": p["non_embedding"],
        "total_params": p["total"],
        "seq_len": t,
        "train_flops_per_token": flops,
        "forward_flops_per_token": flops / 3,
    }
    if as_json:
        click.echo(json.dumps(info))
        return
    print_config(cfg, f"model config {name}")
    print_summary(f"model {name}", {
        "embedding params": f"{p['embedding']:,} ({p['embedding'] / 1e9:.3f}B)",
        "non-embedding params": f"{p['non_embedding']:,} ({p['non_embedding'] / 1e9:.3f}B)",
        "total params": f"{p['total']:,} ({p['total'] / 1e9:.3f}B)",
        f"train FLOPs/token (seq {t})": f"{flops:.4g}",
        "forward FLOPs/token": f"{flops / 3:.4g}",
    })


@model_group.command("init", epilog="""\b
Examples:
  afm model init --config tiny --out work/ckpt/tiny-init
  afm model init --config 100m --out ckpt/100m --seed 3 --set max_seq_len=4096
""")
@click.option("--config", "config_name", required=True, help="Named model config.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Checkpoint directory.")
@click.option("--seed", default=0, show_default=True, type=SEED)
@click.option("--set", "overrides", multiple=True, help="Config override FIELD=VALUE (repeatable).")
@click.option("--overwrite", is_flag=True, help="Replace an existing checkpoint.")
def model_init(config_name: str, out: str, seed: int, overrides: tuple[str, ...], overwrite: bool) -> None:
    """Write a randomly initialised checkpoint (Orbax params + config.json)."""
    from afm.config import print_config
    from afm.console import console, print_summary
    from afm.model.config import get_config, param_counts

    try:
        cfg = get_config(config_name, **_parse_overrides(overrides))
    except (KeyError, ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from exc
    print_config(cfg, f"model {config_name}")
    start = time.perf_counter()
    with console.status("initialising parameters...", spinner="dots"):
        from afm.model.checkpoints.checkpoint import save_params
        from afm.model.initializer import init_model

        try:
            path = save_params(init_model(cfg, seed), out, overwrite=overwrite)
        except FileExistsError as exc:
            raise click.ClickException(str(exc)) from exc
    print_summary("model init", {"checkpoint": str(path), "params": param_counts(cfg)["total"],
                                 "seed": seed, "seconds": round(time.perf_counter() - start, 2)})


def _parse_overrides(items: tuple[str, ...]) -> dict:
    """``--set FIELD=VALUE`` items as typed ModelConfig fields (the rules every config
    follows: a whole number for a size, a finite number for a float)."""
    import typing

    from afm.config import ConfigError, coerce, parse_overrides
    from afm.model.config import ModelConfig

    hints = typing.get_type_hints(ModelConfig)
    settable = sorted(k for k in hints if k not in ("palettization", "notes"))
    out: dict = {}
    for key, value in parse_overrides(list(items)).items():
        if key not in settable:
            raise ConfigError(f"--set {key}: not a model config field; fields: {', '.join(settable)}")
        out[key] = coerce(value, hints[key], key)
    return out


# ----------------------------------------------------------------------------- score / generate


@click.command("score", epilog="""\b
Examples:
  afm score --checkpoint work/ckpt/tiny-init --tokens "1 2 3 4"
  afm score --checkpoint ckpt/ --tokenizer tok/ --text "The sky is blue."
""")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--tokens", default=None, help="Space-separated token ids.")
@click.option("--text", default=None, help="Text to tokenize (needs --tokenizer); BOS is prepended.")
@click.option("--tokenizer", "tokenizer_dir", default=None, type=click.Path(exists=True))
def score_command(checkpoint: str, tokens: str | None, text: str | None, tokenizer_dir: str | None) -> None:
    """Per-token log-probabilities (of token i+1 given tokens 0..i) as JSON on stdout."""
    if (tokens is None) == (text is None):
        raise click.UsageError("give exactly one of --tokens or --text")
    if text is not None and tokenizer_dir is None:
        raise click.UsageError("--text needs --tokenizer")
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.inference.scoring import score_tokens

    if tokens is not None:
        try:
            ids = [int(t) for t in tokens.replace(",", " ").split()]
        except ValueError as exc:
            raise click.UsageError(f"--tokens must be integers: {exc}") from exc
    else:
        from afm.model.text.tokenizer import Tokenizer

        ids = Tokenizer.load(tokenizer_dir).encode(text or "", bos=True)
    model, _ = load_model(checkpoint)
    try:
        lps = score_tokens(model, ids)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps({"tokens": ids, "logprobs": lps, "total": sum(lps)}))


@click.command("generate", epilog="""\b
Examples:
  afm generate --checkpoint ckpt/ --tokenizer tok/ --prompt "Once upon a time" --max-new-tokens 32
  afm generate --checkpoint ckpt/ --tokenizer tok/ --chat "What is 2+2?" --temperature 0.7 --top-p 0.9
""")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--tokenizer", "tokenizer_dir", required=True, type=click.Path(exists=True))
@click.option("--prompt", "prompts", multiple=True, help="Plain-text prompt (repeatable: one batch).")
@click.option("--chat", "chats", multiple=True, help="A user message, formatted with the chat template.")
@click.option("--max-new-tokens", default=64, show_default=True, type=POSITIVE_INT)
@click.option("--temperature", default=0.0, show_default=True, type=NON_NEGATIVE, help="0 = greedy.")
@click.option("--top-p", default=1.0, show_default=True, type=PROBABILITY_OPEN)
@click.option("--seed", default=0, show_default=True, type=SEED)
def generate_command(checkpoint: str, tokenizer_dir: str, prompts: tuple[str, ...], chats: tuple[str, ...],
                     max_new_tokens: int, temperature: float, top_p: float, seed: int) -> None:
    """Sample continuations with the KV cache (one JSON line per prompt on stdout)."""
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.inference.sampling import sample
    from afm.model.text.tokenizer import Tokenizer

    if not prompts and not chats:
        raise click.UsageError("give at least one --prompt or --chat")
    tok = Tokenizer.load(tokenizer_dir)
    texts = list(prompts) + list(chats)
    ids = [tok.encode(p, bos=True) for p in prompts]
    ids += [tok.encode_chat([{"role": "user", "content": c}], add_generation_prompt=True)[0] for c in chats]
    model, _ = load_model(checkpoint)
    try:
        out = sample(model, ids, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                     stop_tokens=(tok.eos_id, tok.end_id), seed=seed, pad_id=tok.pad_id)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    for text, new, stopped in zip(texts, out.tokens, out.stopped):
        click.echo(json.dumps({"prompt": text, "completion": tok.decode(new), "tokens": new,
                               "stopped": stopped}, ensure_ascii=False))


# ----------------------------------------------------------------------------- HF export/import


@click.group("export", epilog="""\b
Examples:
  afm export hf --checkpoint ckpt/ --tokenizer tok/ --out hf-model/
""")
def export_group() -> None:
    """Export checkpoints to other ecosystems."""


@export_group.command("hf", epilog="""\b
Examples:
  afm export hf --checkpoint work/ckpt/tiny-init --tokenizer work/tok --out work/hf-tiny
  afm export hf --checkpoint ckpt/ --tokenizer tok/ --out hf/ --dtype bfloat16

\b
The folder loads with transformers' AutoModelForCausalLM / AutoTokenizer (Qwen3
architecture), and so in vLLM and llama.cpp's converter.
""")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--tokenizer", "tokenizer_dir", default=None, type=click.Path(exists=True),
              help="Tokenizer directory (afm tokenizer train --out).")
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--dtype", default="float32", show_default=True,
              type=click.Choice(["float32", "bfloat16", "float16"]))
@click.option("--overwrite", is_flag=True, help="Replace what OUT holds (kept until the export succeeded).")
def export_hf_command(checkpoint: str, tokenizer_dir: str | None, out: str, dtype: str,
                      overwrite: bool) -> None:
    """Write a Hugging Face model folder in the Qwen3 layout (config.json + safetensors)."""
    from afm.console import console, print_summary
    from afm.model.checkpoints.hf_export import export_hf
    from afm.outputs import OutputError, write_directory

    start = time.perf_counter()
    with console.status("exporting...", spinner="dots"):
        try:
            write_directory(out, lambda staging: export_hf(checkpoint, staging, tokenizer_dir=tokenizer_dir,
                                                           dtype=dtype),
                            overwrite=overwrite, manifest={"command": "export hf", "checkpoint": checkpoint})
        except (ValueError, FileNotFoundError, OutputError) as exc:
            raise click.ClickException(str(exc)) from exc
    path = Path(out).resolve()
    files = sorted(p.name for p in path.iterdir())
    print_summary("export hf", {"out": str(path), "files": ", ".join(files), "dtype": dtype,
                                "seconds": round(time.perf_counter() - start, 2)})


@click.group("import", epilog="""\b
Examples:
  afm import hf --hf hf-model/ --out ckpt/
""")
def import_group() -> None:
    """Import checkpoints from other ecosystems."""


@import_group.command("hf", epilog="""\b
Examples:
  afm import hf --hf work/hf-tiny --out work/ckpt/tiny-back
""")
@click.option("--hf", "hf_dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="A Qwen3-layout folder (config.json + safetensors).")
@click.option("--out", required=True, type=click.Path(file_okay=False))
def import_hf_command(hf_dir: str, out: str) -> None:
    """Build an afm checkpoint from a Qwen3-layout Hugging Face folder."""
    from afm.console import console, print_summary
    from afm.model.checkpoints.hf_export import import_hf

    start = time.perf_counter()
    with console.status("importing...", spinner="dots"):
        try:
            path = import_hf(hf_dir, out)
        except (ValueError, FileNotFoundError, FileExistsError) as exc:
            raise click.ClickException(str(exc)) from exc
    print_summary("import hf", {"checkpoint": str(path), "seconds": round(time.perf_counter() - start, 2)})


# ----------------------------------------------------------------------------- tokenizer


@click.group("tokenizer", epilog="""\b
Examples:
  afm tokenizer train --input corpus/ --vocab-size 49152 --out work/tok
  afm tokenizer encode --tokenizer work/tok "Hello 2024"
""")
def tokenizer_group() -> None:
    """Train and use the SentencePiece BPE tokenizer (report §3.1.6)."""


@tokenizer_group.command("train", epilog="""\b
Examples:
  afm tokenizer train --input corpus/ --vocab-size 49152 --out work/tok
  afm tokenizer train --input 'shards/*.parquet' --vocab-size 100352 --sample-docs 1000000 --out tok-server
  afm tokenizer train --input work/demo/curated --vocab-size 512 --out work/demo/tokenizer

\b
BPE, every digit its own token, byte fallback, identity normalisation, special tokens
<pad>=0 <s>=1 </s>=2 <unk>=3 and the chat roles. A small corpus may yield fewer pieces
than asked (the summary says how many). Every covered character takes a piece, so afm
lowers the character coverage when --vocab-size has no room for them all (the rarest
characters then use byte pieces; the summary says how many characters got their own).
""")
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL document shards, directories or globs.")
@click.option("--vocab-size", default=49_152, show_default=True, type=Number(1, 2**31 - 1, integer=True),
              help="Pieces in the vocabulary (at least the 256 byte pieces and the specials).")
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--sample-docs", default=200_000, show_default=True, type=POSITIVE_INT,
              help="Documents sampled (uniformly, seeded) for training.")
@click.option("--seed", default=0, show_default=True, type=SEED)
@click.option("--character-coverage", type=PROBABILITY_OPEN, default=None,
              help="Share of characters given their own piece (the rest use byte pieces). Default: the "
                   "highest up to 0.9995 that --vocab-size has room for.")
@click.option("--overwrite", is_flag=True,
              help="Replace the tokenizer OUT holds (kept until the new one is trained).")
def tokenizer_train(inputs: tuple[str, ...], vocab_size: int, out: str, sample_docs: int, seed: int,
                    character_coverage: float | None, overwrite: bool) -> None:
    """Train the tokenizer on a sample of documents."""
    from afm.console import console, print_summary
    from afm.model.text.tokenizer import TokenizerError, document_files, train_tokenizer
    from afm.outputs import OutputError, write_directory
    from afm.preflight import InputProblem, check_inputs

    try:
        check_inputs(inputs)  # missing, empty, binary, undecodable: one line before any work
        files = document_files(inputs)
    except InputProblem as exc:
        raise click.ClickException(str(exc)) from None
    except FileNotFoundError as exc:
        raise click.UsageError(str(exc)) from exc
    if not files:
        raise click.UsageError(f"no .parquet / .jsonl inputs in {list(inputs)}")
    console.print(f"tokenizer: {len(files)} file(s), vocab {vocab_size}, sample {sample_docs} docs")
    start = time.perf_counter()

    def train(staging: str) -> Path:
        with console.status("training SentencePiece BPE...", spinner="dots"):
            return train_tokenizer(files, staging, vocab_size=vocab_size, sample_docs=sample_docs, seed=seed,
                                   character_coverage=character_coverage)

    try:
        write_directory(out, train, overwrite=overwrite,
                        manifest={"command": "tokenizer train", "inputs": files, "vocab_size": vocab_size})
    except (TokenizerError, OutputError) as exc:
        raise click.ClickException(str(exc)) from exc
    path = Path(out).resolve()
    meta = json.loads((path / "tokenizer_meta.json").read_text())
    reached = meta["vocab_size"]
    print_summary("tokenizer train", {
        "out": str(path),
        "vocabulary": f"{reached:,} of {vocab_size:,} requested" + (
            "" if reached >= vocab_size else " (the corpus has no more merges to make: give more documents)"),
        "character coverage": f"{meta['character_coverage']:.6g}, {meta['characters']} of "
                              f"{meta['distinct_characters']} distinct characters ({meta['coverage_choice']})",
        "documents seen": meta["docs_seen"], "documents sampled": meta["docs_sampled"],
        "lines trained": meta["lines_trained"], "seconds": round(time.perf_counter() - start, 2)})


@tokenizer_group.command("encode", epilog="""\b
Examples:
  afm tokenizer encode --tokenizer work/tok "Hello 2024"
  afm tokenizer encode --tokenizer work/tok --pieces "naïve café"
""")
@click.option("--tokenizer", "tokenizer_dir", required=True, type=click.Path(exists=True))
@click.option("--pieces", is_flag=True, help="Print the pieces too.")
@click.argument("text")
def tokenizer_encode(tokenizer_dir: str, pieces: bool, text: str) -> None:
    """Token ids of TEXT as JSON on stdout."""
    from afm.model.text.tokenizer import Tokenizer

    tok = Tokenizer.load(tokenizer_dir)
    ids = tok.encode(text)
    out: dict = {"ids": ids}
    if pieces:
        out["pieces"] = [tok.id_to_piece(i) for i in ids]
    click.echo(json.dumps(out, ensure_ascii=False))


COMMANDS = [model_group, score_command, generate_command, export_group, import_group, tokenizer_group]
