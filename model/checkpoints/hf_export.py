"""Export to (and import from) a Hugging Face model folder in the Qwen3 layout.

The AFM architecture is Qwen3's (per-head q/k RMSNorm before RoPE, GQA, SwiGLU, tied
embeddings, rotate-half RoPE), so the conversion is exact:

=================================  ================================================
afm parameter                      Qwen3 tensor ([out, in] like torch.nn.Linear)
=================================  ================================================
embed [V, D]                       model.embed_tokens.weight
layers.i.attn_norm.scale           model.layers.i.input_layernorm.weight
layers.i.attn.wq [D, N, H]         model.layers.i.self_attn.q_proj.weight [N*H, D]
layers.i.attn.wk / wv [D, K, H]    ...self_attn.k_proj / v_proj.weight [K*H, D]
layers.i.attn.wo [N, H, D]         ...self_attn.o_proj.weight [D, N*H]
layers.i.attn.q_norm / k_norm      ...self_attn.q_norm / k_norm.weight [H]
layers.i.mlp_norm.scale            model.layers.i.post_attention_layernorm.weight
layers.i.mlp.w_gate / w_up [D, F]  ...mlp.gate_proj / up_proj.weight [F, D]
layers.i.mlp.w_down [F, D]         ...mlp.down_proj.weight [D, F]
final_norm.scale * logit_scale     model.norm.weight  (the muParam logit scale folded in)
=================================  ================================================

A palettized checkpoint is exported dequantized (safetensors has no palettes), an adapter
directory merged into its base; :func:`export_peft` writes a LoRA adapter in PEFT's format
(``adapter_config.json`` + ``adapter_model.safetensors``) for the exported base, so
``PeftModel.from_pretrained(Qwen3ForCausalLM.from_pretrained(BASE), ADAPTER)`` runs it.

The tokenizer is written as a ``tokenizers`` BPE ``tokenizer.json`` (vocabulary and
merges derived from the SentencePiece pieces, byte fallback, Metaspace with no dummy
prefix) with the chat template in ``tokenizer_config.json``, so
``AutoTokenizer.from_pretrained(DIR)`` loads it without SentencePiece.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from afm.model.checkpoints.adapter_io import load_adapter
from afm.model.checkpoints.checkpoint import load_model, save_params
from afm.model.config import ModelConfig
from afm.model.on_device.lora import LoRA, target_of
from afm.model.on_device.palettize import Int8Embedding, PalettizedWeight
from afm.model.text.chat import CHAT_TEMPLATE
from afm.model.text.tokenizer import BOS, EOS, PAD, UNK, Tokenizer

SAFETENSORS_INDEX = "model.safetensors.index.json"
_DTYPES = ("float32", "bfloat16", "float16")


# ------------------------------------------------------------------------- weights


def to_hf_tensors(params: dict[str, Any], cfg: ModelConfig) -> dict[str, np.ndarray]:
    """afm pure-dict params (``nnx.State.to_pure_dict``) -> Qwen3 tensors (float32 numpy)."""
    d, n, k, h = cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    f32 = lambda x: np.asarray(x, dtype=np.float32)  # noqa: E731
    out: dict[str, np.ndarray] = {"model.embed_tokens.weight": f32(params["embed"])}
    for i in range(cfg.n_layers):
        lp = params["layers"][i]
        pre = f"model.layers.{i}."
        a, m = lp["attn"], lp["mlp"]
        out[pre + "input_layernorm.weight"] = f32(lp["attn_norm"]["scale"])
        out[pre + "post_attention_layernorm.weight"] = f32(lp["mlp_norm"]["scale"])
        out[pre + "self_attn.q_proj.weight"] = f32(a["wq"]).reshape(d, n * h).T
        out[pre + "self_attn.k_proj.weight"] = f32(a["wk"]).reshape(d, k * h).T
        out[pre + "self_attn.v_proj.weight"] = f32(a["wv"]).reshape(d, k * h).T
        out[pre + "self_attn.o_proj.weight"] = f32(a["wo"]).reshape(n * h, d).T
        out[pre + "self_attn.q_norm.weight"] = f32(a["q_norm"]["scale"])
        out[pre + "self_attn.k_norm.weight"] = f32(a["k_norm"]["scale"])
        out[pre + "mlp.gate_proj.weight"] = f32(m["w_gate"]).T
        out[pre + "mlp.up_proj.weight"] = f32(m["w_up"]).T
        out[pre + "mlp.down_proj.weight"] = f32(m["w_down"]).T
    out["model.norm.weight"] = f32(params["final_norm"]["scale"]) * np.float32(cfg.logit_scale)
    return {name: np.ascontiguousarray(t) for name, t in out.items()}


def from_hf_tensors(tensors: dict[str, np.ndarray], cfg: ModelConfig) -> dict[str, Any]:
    """Qwen3 tensors -> afm pure-dict params (float32)."""
    d, n, k, h = cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim

    def get(name: str) -> np.ndarray:
        try:
            return np.asarray(tensors[name], dtype=np.float32)
        except KeyError:
            raise ValueError(f"HF checkpoint lacks tensor {name!r}") from None

    embed = get("model.embed_tokens.weight")
    if "lm_head.weight" in tensors and not np.array_equal(get("lm_head.weight"), embed):
        raise ValueError("AFM ties input and output embeddings; this checkpoint has a separate lm_head")
    layers = []
    for i in range(cfg.n_layers):
        pre = f"model.layers.{i}."
        layers.append({
            "attn_norm": {"scale": get(pre + "input_layernorm.weight")},
            "mlp_norm": {"scale": get(pre + "post_attention_layernorm.weight")},
            "attn": {
                "wq": get(pre + "self_attn.q_proj.weight").T.reshape(d, n, h),
                "wk": get(pre + "self_attn.k_proj.weight").T.reshape(d, k, h),
                "wv": get(pre + "self_attn.v_proj.weight").T.reshape(d, k, h),
                "wo": get(pre + "self_attn.o_proj.weight").T.reshape(n, h, d),
                "q_norm": {"scale": get(pre + "self_attn.q_norm.weight")},
                "k_norm": {"scale": get(pre + "self_attn.k_norm.weight")},
            },
            "mlp": {
                "w_gate": get(pre + "mlp.gate_proj.weight").T,
                "w_up": get(pre + "mlp.up_proj.weight").T,
                "w_down": get(pre + "mlp.down_proj.weight").T,
            },
        })
    final = get("model.norm.weight") / np.float32(cfg.logit_scale)
    return {"embed": embed, "layers": dict(enumerate(layers)), "final_norm": {"scale": final}}


def hf_config(cfg: ModelConfig, *, dtype: str, special_ids: dict[str, int] | None = None) -> dict[str, Any]:
    """The Qwen3 ``config.json`` for ``cfg``."""
    ids = special_ids or {"bos": 1, "eos": 2, "pad": 0}
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.dim,
        "intermediate_size": cfg.ffn_dim,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_base,
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_base},
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": cfg.n_layers,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": dtype,
        "dtype": dtype,
        "bos_token_id": ids["bos"],
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["pad"],
        "afm_config": cfg.to_dict(),
    }


def config_from_hf(hf: dict[str, Any], name: str = "hf-import") -> ModelConfig:
    """A :class:`ModelConfig` from a Qwen3 ``config.json`` (an afm export round-trips)."""
    if hf.get("model_type") != "qwen3":
        raise ValueError(f"expected a qwen3 config, got model_type={hf.get('model_type')!r}")
    if not hf.get("tie_word_embeddings", False):
        raise ValueError("AFM ties its embeddings; this Qwen3 model does not (tie_word_embeddings)")
    if hf.get("attention_bias"):
        raise ValueError("AFM has no attention biases; this Qwen3 model does (attention_bias)")
    if "afm_config" in hf:
        return ModelConfig.from_dict(hf["afm_config"])
    rope = hf.get("rope_theta") or (hf.get("rope_parameters") or {}).get("rope_theta", 1_000_000.0)
    n_heads = hf["num_attention_heads"]
    return ModelConfig(
        name=name,
        vocab_size=hf["vocab_size"],
        dim=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=n_heads,
        n_kv_heads=hf.get("num_key_value_heads", n_heads),
        head_dim=hf.get("head_dim") or hf["hidden_size"] // n_heads,
        ffn_dim=hf["intermediate_size"],
        rope_base=float(rope),
        max_seq_len=hf.get("max_position_embeddings", 4096),
        norm_eps=hf.get("rms_norm_eps", 1e-6),
    )


def _np_dtype(dtype: str) -> Any:
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def write_safetensors(
    tensors: dict[str, np.ndarray], out: Path, *, dtype: str, max_shard_bytes: int = 5 * 2**30
) -> list[str]:
    """Write tensors (cast to ``dtype``) as one file or as shards plus an index."""
    from safetensors.numpy import save_file

    np_dtype = _np_dtype(dtype)
    names = sorted(tensors)
    shards: list[list[str]] = [[]]
    size = 0
    for name in names:
        nbytes = tensors[name].size * np.dtype(np_dtype).itemsize
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    meta = {"format": "pt"}
    if len(shards) == 1:
        files = ["model.safetensors"]
    else:
        files = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map = {}
    total = 0
    for fname, group in zip(files, shards):
        chunk = {n: tensors[n].astype(np_dtype) for n in group}
        total += sum(t.nbytes for t in chunk.values())
        save_file(chunk, str(out / fname), metadata=meta)
        weight_map.update(dict.fromkeys(group, fname))
    if len(files) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / SAFETENSORS_INDEX).write_text(json.dumps(index, indent=2) + "\n")
    return files


def read_safetensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(f"no model.safetensors (or index) in {folder}")
    tensors: dict[str, np.ndarray] = {}
    for f in files:
        for name, t in load_file(str(folder / f)).items():
            tensors[name] = np.asarray(t, dtype=np.float32)
    return tensors


# ------------------------------------------------------------------------- tokenizer


def tokenizer_json(tokenizer: Any) -> dict[str, Any]:
    """A ``tokenizers`` BPE description equivalent to the SentencePiece model.

    SentencePiece BPE stores pieces ranked by score, not merges; the merges are derived
    from the vocabulary (every split of a piece into two pieces), ranked by the piece's
    id (its merge order), then by the ids of its two halves.
    """
    sp = tokenizer.sp
    vocab: dict[str, int] = {}
    special: list[dict[str, Any]] = []
    normal: dict[str, int] = {}
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        vocab[piece] = i
        if sp.is_control(i) or sp.is_unknown(i):
            special.append({
                "id": i, "content": piece, "single_word": False, "lstrip": False,
                "rstrip": False, "normalized": False, "special": True,
            })
        elif not sp.is_byte(i) and not sp.is_unused(i):
            normal[piece] = i
    merges: list[tuple[int, int, int, str, str]] = []
    for piece, pid in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                merges.append((pid, normal[left], normal[right], left, right))
    merges.sort()
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": special,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False,
        },
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": sp.id_to_piece(sp.unk_id()),
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[m[3], m[4]] for m in merges],
        },
    }


def write_tokenizer(tokenizer: Any, out: Path, *, max_len: int) -> None:
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(tokenizer), ensure_ascii=False))
    shutil.copyfile(tokenizer.path, out / "tokenizer.model")
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "unk_token": UNK}, indent=2) + "\n")


# ------------------------------------------------------------------------- entry points


def export_hf(
    checkpoint: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    dtype: str = "float32",
) -> Path:
    """Write ``out_dir`` = config.json + safetensors (+ tokenizer files) from an afm checkpoint."""

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}")

    model, cfg = load_model(checkpoint)
    params = dense_params(model)
    cfg = cfg.replace(palettization=None)
    tok = Tokenizer.load(tokenizer_dir) if tokenizer_dir else None
    if tok is not None and tok.vocab_size > cfg.vocab_size:
        raise ValueError(
            f"tokenizer has {tok.vocab_size} pieces but the model only {cfg.vocab_size} rows"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ids = None if tok is None else {"bos": tok.bos_id, "eos": tok.eos_id, "pad": tok.pad_id}
    (out / "config.json").write_text(json.dumps(hf_config(cfg, dtype=dtype, special_ids=ids), indent=2) + "\n")
    gen = {"bos_token_id": (ids or {}).get("bos", 1), "eos_token_id": (ids or {}).get("eos", 2),
           "pad_token_id": (ids or {}).get("pad", 0)}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    write_safetensors(to_hf_tensors(params, cfg), out, dtype=dtype)
    if tok is not None:
        write_tokenizer(tok, out, max_len=cfg.max_seq_len)
    return out


def import_hf(hf_dir: str | os.PathLike[str], out_checkpoint: str | os.PathLike[str]) -> Path:
    """An afm checkpoint from a Qwen3-layout folder (and its ``tokenizer.model``, if any,
    copied to ``out_checkpoint/tokenizer``)."""

    folder = Path(hf_dir)
    hf = json.loads((folder / "config.json").read_text())
    cfg = config_from_hf(hf)
    params = from_hf_tensors(read_safetensors(folder), cfg)
    path = save_params(params, out_checkpoint, cfg)
    if (folder / "tokenizer.model").is_file():
        (path / "tokenizer").mkdir()
        shutil.copyfile(folder / "tokenizer.model", path / "tokenizer" / "tokenizer.model")
    return path


# ------------------------------------------------------------------------- PEFT adapters

# afm LoRA target -> the Qwen3 module PEFT adapts.
PEFT_MODULES = {
    "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
    "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj",
}


def to_peft_tensors(adapter: Any) -> dict[str, np.ndarray]:
    """afm ``A [*in, r]``, ``B [r, *out]`` -> PEFT ``lora_A.weight [r, in]``,
    ``lora_B.weight [out, r]`` (torch Linear layout, flattened in/out axes)."""

    out: dict[str, np.ndarray] = {}
    for path, (a, b) in adapter.weights.items():
        target, n_in = target_of(path)
        layer = int(path.split("/")[1])
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        rank = a.shape[-1]
        pre = f"base_model.model.model.layers.{layer}.{PEFT_MODULES[target]}."
        out[pre + "lora_A.weight"] = np.ascontiguousarray(a.reshape(-1, rank).T)
        out[pre + "lora_B.weight"] = np.ascontiguousarray(b.reshape(rank, -1).T)
    return out


def peft_config(adapter: Any, base_model: str | None) -> dict[str, Any]:
    """PEFT's ``adapter_config.json`` for an afm adapter (plain LoRA, no dropout, no bias)."""
    cfg = adapter.config
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": cfg.rank,
        "lora_alpha": cfg.alpha,
        "target_modules": sorted(PEFT_MODULES[t].split(".")[-1] for t in cfg.targets),
        "layers_to_transform": None if cfg.layers is None else list(cfg.layers),
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "inference_mode": True,
        "modules_to_save": None,
    }


def export_peft(
    adapter_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    base_model: str | None = None,
    dtype: str | None = None,
) -> Path:
    """Write an afm adapter in PEFT's format. ``base_model`` (an HF export of the base or
    a hub id) goes into ``base_model_name_or_path``; ``dtype`` defaults to the adapter's
    stored 16-bit type."""

    adapter, meta = load_adapter(adapter_dir)
    dtype = dtype or meta.get("dtype", "float16")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}")
    from safetensors.numpy import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    np_dtype = _np_dtype(dtype)
    tensors = {k: v.astype(np_dtype) for k, v in to_peft_tensors(adapter).items()}
    save_file(tensors, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    config = peft_config(adapter, None if base_model is None else os.fspath(base_model))
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def dense_params(model: Any) -> dict[str, Any]:
    """``nnx.to_pure_dict`` of the dense model ``model`` computes: every palettized or
    int8 weight dequantized, every LoRA adapter merged (float32 NumPy). What an export to
    a format without palettes (Hugging Face safetensors) writes."""
    import jax
    from flax import nnx

    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    special = [(tuple(path), node) for path, node in nnx.iter_graph(model)
               if isinstance(node, (PalettizedWeight, Int8Embedding, LoRA))]
    outer = [(p, n) for p, n in special if not any(q != p and p[:len(q)] == q for q, _ in special)]
    for path, node in outer:
        parent = pure
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = np.asarray(jax.device_get(node[...]), np.float32)
    return pure
