"""Model sizes as named, typed configs, with their parameter counts and FLOPs per token.

The architecture is the one of the AFM report (§2): a dense decoder-only Transformer with
tied input/output embeddings, pre-norm RMSNorm, per-head RMSNorm on queries and keys
(before RoPE), grouped-query attention, SwiGLU and RoPE. Only the sizes change between
the named configs below.

muParam (simple)
----------------
Pre-training uses "muParam (simple)" (Wortsman et al. 2023, *Small-scale proxies for
large-scale Transformer training instabilities*). The model owns the two parts of it that
live in the forward pass; the optimizer (``afm.training``) owns the learning-rate part:

* **Initialisation.** Every hidden matrix (q, k, v, o, gate, up, down) is drawn from a
  normal with std ``1/sqrt(fan_in)``, so each layer's output has unit scale at any width.
  The embedding table is drawn with std ``embed_init_std`` (1.0): an input layer's fan-in
  is a one-hot, so its scale must not depend on the width. Norm scales start at 1.
* **Logit scale.** The embedding is tied, so the readout is ``h @ E.T`` with ``E`` of
  std 1 and ``h`` of unit RMS (after the final RMSNorm). muP's readout multiplier shrinks
  as ``1/width``; we use exactly ``logit_scale = 1 / width``. At init a token's own
  logit is then ``|E_t|^2 / (width * rms) <= 1`` and every other logit has std about
  ``1/sqrt(width)``, so the first loss is about ``log(vocab)`` at ANY width. (A larger
  multiplier, e.g. one calibrated to unit-variance logits at ``base_width``, gives the
  tied table a ``sqrt(base_width)``-nat bias to repeat the input token at init.) Once
  ``h`` and ``E`` align in training the ``1/width`` keeps the logits O(1) as width grows.
* **Learning rate** (applied by the optimizer): hidden matrices get
  ``lr * base_width / width`` (:attr:`ModelConfig.hidden_lr_multiplier`); embeddings and
  norm scales keep the base LR. ``base_width = 768`` is the proxy width of the LR sweep.

The HF export folds ``logit_scale`` into the final norm's weight, which is exact
(``(n(h) * w * s) @ E.T == s * (n(h) * w) @ E.T``), so the exported Qwen3 model keeps
its tied embedding and gives the same log-probabilities.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from afm.errors import UserError
from afm.model import remat
from afm.model.attention import BACKENDS, attention_flops_per_token
from afm.model.remat import saved_names

AttentionImpl = Literal["auto", "xla", "cudnn", "splash"]
DTYPES = ("bfloat16", "float16", "float32")
SIZES = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "max_seq_len", "base_width")
MAX_SIZE = 2**31 - 1  # array dimensions and index arithmetic are 32-bit in XLA's kernels
MAX_PARAMS = 10**13  # far above any model (10 trillion parameters): beyond it, a typo


class ModelConfigError(UserError):
    """A size or number of a model config that no model can have."""


@dataclass(frozen=True)
class Palettization:
    """How a quantized model stores its weights (``afm.model.on_device.palettize``, report §5.2).

    ``bits`` names every palettized projection with its index width, e.g.
    ``(("layers/0/attn/wq", 4), ("layers/0/mlp/w_up", 2), ...)``; projections not named
    stay dense. ``embed_bits`` 8 stores the tied embedding as int8 per row, 0 keeps it
    dense. Part of the model config so ``Transformer(cfg)`` builds the quantized model
    itself (hashable: configs are static arguments of compiled functions).
    """

    bits: tuple[tuple[str, int], ...] = ()
    group_size: int = 16
    embed_bits: int = 8
    lut_dtype: str = "float16"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Palettization:
        return cls(
            bits=tuple((str(p), int(b)) for p, b in data.get("bits", ())),
            group_size=int(data.get("group_size", 16)),
            embed_bits=int(data.get("embed_bits", 8)),
            lut_dtype=str(data.get("lut_dtype", "float16")),
        )


@dataclass(frozen=True)
class ModelConfig:
    """Every size and numeric choice of one AFM transformer.

    ``dtype`` is the compute dtype (activations, matmuls); parameters are stored in
    ``param_dtype`` (float32, as the report keeps weights and optimizer state in f32).
    """

    name: str = "custom"
    vocab_size: int = 512
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 16
    ffn_dim: int = 192
    rope_base: float = 500_000.0
    max_seq_len: int = 256
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    dtype: str = "bfloat16"
    param_dtype: str = "float32"
    # Activation checkpointing per block: a policy of afm.model.remat ("none", "full",
    # "dots", "attention", "qkv_attention", "dots_except_mlp" or "save:NAME,...").
    remat: str = "none"
    # Attention kernel (afm.model.attention): "auto" = cuDNN on GPU, splash on TPU, XLA
    # elsewhere; or name one of "xla", "cudnn", "splash".
    attention_impl: AttentionImpl = "auto"
    # Upper bound on packed documents per row for cuDNN's packed layout (0: unknown, so
    # packed rows use a masked kernel). The trainer sets it to the loader's cap.
    max_segments: int = 0
    # Run the blocks under one `lax.scan` (one compiled block: fast compiles for deep models).
    scan_layers: bool = False
    # Dropout on the embedding and on every attention / MLP output before its residual add,
    # applied only when the forward pass is given a dropout key (training). The report uses
    # 0.1 in SFT (§4.2); pre-training runs without it.
    dropout: float = 0.0
    # muParam (simple); see the module docstring.
    base_width: int = 768
    embed_init_std: float = 1.0
    # FP8 matmuls for the q/k/v/o projections and the FFN (afm.model.blocks.fp8): e4m3 forward,
    # e5m2 gradients, per-tensor current scaling. For Hopper-class GPUs; emulated elsewhere.
    fp8: bool = False
    # Quantized storage (afm.model.on_device.palettize); None: dense float parameters.
    palettization: Palettization | None = None
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        self._check_numbers()
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"{self.name}: n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads}) for grouped-query attention"
            )
        if self.head_dim % 2:
            raise ValueError(f"{self.name}: head_dim must be even for RoPE, got {self.head_dim}")
        if not self.tie_embeddings:
            raise ValueError("AFM ties input and output embeddings (report §2)")

        remat.validate(self.remat)
        if self.attention_impl not in BACKENDS:
            raise ValueError(f"unknown attention_impl {self.attention_impl!r}; choose from {BACKENDS}")

    def _check_numbers(self) -> None:
        """Every number finite and in its range, whatever built the config (a named size,
        ``--set``, a training stage's overrides, a checkpoint's config.json)."""
        for n in SIZES:
            v = getattr(self, n)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ModelConfigError(f"{self.name}: {n} must be a whole number, got {v!r}")
            if not 1 <= v <= MAX_SIZE:
                raise ModelConfigError(f"{self.name}: {n} must be from 1 to {MAX_SIZE}, got {v}")
        if isinstance(self.max_segments, bool) or not isinstance(self.max_segments, int) or self.max_segments < 0:
            raise ModelConfigError(f"{self.name}: max_segments must be a whole number >= 0, got {self.max_segments!r}")
        for n, low, high, what in (("rope_base", 1.0, math.inf, "> 1 (the base of RoPE's frequencies)"),
                                   ("norm_eps", 0.0, 1.0, "in (0, 1)"),
                                   ("embed_init_std", 0.0, math.inf, "> 0"),
                                   ("dropout", -1.0, 1.0, "in [0, 1)")):
            v = getattr(self, n)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and low < v < high
            if not ok or (n == "dropout" and v < 0):
                raise ModelConfigError(f"{self.name}: {n} must be a finite number {what}, got {v!r}")
        for n in ("dtype", "param_dtype"):
            if getattr(self, n) not in DTYPES:
                raise ModelConfigError(f"{self.name}: {n} must be one of {DTYPES}, got {getattr(self, n)!r}")
        per_layer = self.dim * (2 * self.n_heads + 2 * self.n_kv_heads) * self.head_dim + 3 * self.dim * self.ffn_dim
        total = self.n_layers * per_layer + self.vocab_size * self.dim
        if total > MAX_PARAMS:
            raise ModelConfigError(f"{self.name}: {total:.3g} parameters is not a model any machine holds "
                             f"(more than {MAX_PARAMS:.0e}); check the sizes")

    # -- muParam helpers ---------------------------------------------------------------
    @property
    def width(self) -> int:
        """The muP width: the model dimension."""
        return self.dim

    @property
    def hidden_lr_multiplier(self) -> float:
        """LR multiplier for hidden matrices under muParam (simple): base_width / width."""
        return self.base_width / self.width

    @property
    def logit_scale(self) -> float:
        """Readout multiplier: 1 / width (muP readout; see the module docstring)."""
        return 1.0 / self.width

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown ModelConfig fields: {sorted(unknown)}")
        if data.get("palettization") is not None:
            data = {**data, "palettization": Palettization.from_dict(data["palettization"])}
        return cls(**data)


def _cfg(**kw: Any) -> ModelConfig:
    return ModelConfig(**kw)


# Default remat per size (afm.model.remat): the cheapest policy whose estimated memory
# (estimate_train_memory_gb, below) fits 80 GB at 4 sequences x 4096 tokens per device, on
# 1 device up to the 3B on-device model, 8 for the 6.4B teacher, 256 (FSDP) for the server:
# 1b "none" 41 GB; on-device "dots_except_mlp" 55 GB ("none" 87); teacher 28 GB on 8
# ("none" 96); server "qkv_attention" 43 GB on 256 ("dots" 120, "none" 190).
CONFIGS: dict[str, ModelConfig] = {
    # Tests and the demo: trains in seconds on a laptop CPU.
    "tiny": _cfg(
        name="tiny", vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2,
        head_dim=16, ffn_dim=192, max_seq_len=256,
        notes="tests/demo size; vocab matches a tokenizer trained on the demo corpus",
    ),
    # The tiny model's teacher for pruning + distillation tests and the demo: tiny with a
    # 3x wider FFN (576 -> pruned to tiny's 192, about the teacher -> on-device ratio of
    # 23296 -> 8064), everything else shared, as afm-teacher-6.4b shares afm-on-device's.
    "tiny-teacher": _cfg(
        name="tiny-teacher", vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2,
        head_dim=16, ffn_dim=576, max_seq_len=256,
        notes="tests/demo: tiny with a 3x FFN, pruned to tiny's 192 (afm.training.tasks.prune)",
    ),
    # The muP proxy width (768): the LR sweep model and CPU/GPU benchmarks.
    "100m": _cfg(
        name="100m", vocab_size=49_152, dim=768, n_layers=12, n_heads=12, n_kv_heads=4,
        head_dim=64, ffn_dim=2048, max_seq_len=2048,
        notes="~76M non-embedding + 38M embedding; width = base_width (the muP proxy)",
    ),
    "1b": _cfg(
        name="1b", vocab_size=49_152, dim=2048, n_layers=20, n_heads=16, n_kv_heads=8,
        head_dim=128, ffn_dim=5632, max_seq_len=4096,
        notes="~0.94B non-embedding + 0.10B embedding",
    ),
    # Table 1 of the report. The FFN hidden size is not published (it is the result of
    # pruning the 6.4B teacher's FFN); 8064 = 63 x 128 is the multiple of 128 whose
    # non-embedding count is closest to the reported 2.58B (2.5865B; embedding 0.151B).
    "afm-on-device": _cfg(
        name="afm-on-device", vocab_size=49_152, dim=3072, n_layers=26, n_heads=24,
        n_kv_heads=8, head_dim=128, ffn_dim=8064, max_seq_len=4096, remat="dots_except_mlp",
        notes="Table 1: 2.58B non-embedding, 0.15B embedding (FFN 8064 is our choice)",
    ),
    # The teacher that is pruned into afm-on-device. Pruning learns masks over the FFN
    # hidden dimension ONLY (§3.2.1) and distillation uses the teacher's top-1 token, so
    # the teacher must share everything but the FFN width with the student: same dim,
    # heads, layers and the 49k vocabulary. FFN 23296 (182 x 128) gives 6.39B in total.
    "afm-teacher-6.4b": _cfg(
        name="afm-teacher-6.4b", vocab_size=49_152, dim=3072, n_layers=26, n_heads=24,
        n_kv_heads=8, head_dim=128, ffn_dim=23_296, max_seq_len=4096, remat="dots_except_mlp",
        notes="our choice: the on-device shape with a 2.9x wider FFN (FFN-only pruning)",
    ),
    # AFM-server's size is not published. Our choice: a ~22B dense model with the 8 KV
    # heads the report gives, head_dim 128, and the 100k vocabulary (100,352 = 784 x 128,
    # a multiple of 128 so the vocab shards evenly).
    "afm-server": _cfg(
        name="afm-server", vocab_size=100_352, dim=6144, n_layers=56, n_heads=48,
        n_kv_heads=8, head_dim=128, ffn_dim=16_384, max_seq_len=4096, scan_layers=True,
        remat="qkv_attention",
        notes="size unpublished; our documented choice (~21.8B non-embedding, 100k vocab)",
    ),
}


def param_bytes(cfg: ModelConfig) -> int:
    """Bytes of the parameters alone, in ``param_dtype`` (optimizer state not counted)."""
    import numpy as np

    return param_counts(cfg)["total"] * np.dtype(cfg.param_dtype).itemsize


class ModelSizeError(UserError):
    """The model's parameters alone do not fit the memory here."""


def memory_here() -> tuple[int, str]:
    """Bytes of memory the parameters could use here, and what that memory is: the
    accelerators' (summed over this host's devices) or the host's RAM."""
    import os

    import jax

    devices = jax.local_devices()
    limits = []
    for d in devices:
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001 - a backend without statistics
            stats = {}
        if "bytes_limit" in stats:
            limits.append(int(stats["bytes_limit"]))
    if limits and len(limits) == len(devices):
        return sum(limits), f"{len(devices)} {devices[0].platform} device(s)"
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this host's RAM"


def check_fits(cfg: ModelConfig, where: str) -> None:
    """Refuse, before any allocation, a model whose parameters alone exceed the memory
    here (``where``: what was about to build it, for the message)."""
    import jax

    need = param_bytes(cfg) // max(1, jax.process_count())  # FSDP: each host holds its share
    have, what = memory_here()
    if need > have:
        raise ModelSizeError(
            f"{where}: {cfg.name} has {param_counts(cfg)['total']:,} parameters, {need / 2**30:,.1f} GiB in "
            f"{cfg.param_dtype} on this host before any activation or optimizer state, more than the "
            f"{have / 2**30:,.1f} GiB of {what}; check the sizes (dim, n_layers, ffn_dim, vocab_size)")


def get_config(name: str, **overrides: Any) -> ModelConfig:
    """A named config, optionally with fields replaced (e.g. ``max_seq_len=8192``)."""
    try:
        cfg = CONFIGS[name]
    except KeyError:
        raise KeyError(f"unknown model config {name!r}; known: {sorted(CONFIGS)}") from None
    return cfg.replace(**overrides) if overrides else cfg


def param_counts(cfg: ModelConfig) -> dict[str, int]:
    """Parameter counts: ``embedding`` (the tied table), ``non_embedding``, ``total``.

    Non-embedding = per block (q, k, v, o, gate, up, down matrices + 2 RMSNorm scales +
    the q/k norm scales) x layers + the final norm. The tied table is counted once.
    """
    q = cfg.dim * cfg.n_heads * cfg.head_dim
    kv = 2 * cfg.dim * cfg.n_kv_heads * cfg.head_dim
    o = cfg.n_heads * cfg.head_dim * cfg.dim
    ffn = 3 * cfg.dim * cfg.ffn_dim
    norms = 2 * cfg.dim + 2 * cfg.head_dim
    per_layer = q + kv + o + ffn + norms
    non_embedding = cfg.n_layers * per_layer + cfg.dim
    embedding = cfg.vocab_size * cfg.dim
    return {
        "embedding": embedding,
        "non_embedding": non_embedding,
        "total": embedding + non_embedding,
    }


def matmul_params(cfg: ModelConfig) -> int:
    """Parameters that take part in a matmul per token: the block matrices plus the tied
    table used as the readout (the input lookup is free; norms are negligible)."""
    per_layer = (
        cfg.dim * cfg.n_heads * cfg.head_dim
        + 2 * cfg.dim * cfg.n_kv_heads * cfg.head_dim
        + cfg.n_heads * cfg.head_dim * cfg.dim
        + 3 * cfg.dim * cfg.ffn_dim
    )
    return cfg.n_layers * per_layer + cfg.vocab_size * cfg.dim


def flops_per_token(cfg: ModelConfig, seq_len: int | None = None, *, causal: bool = True) -> float:
    """Model training FLOPs (forward + backward) per token:

    ``6 * N + 6 * n_layers * n_heads * head_dim * seq_len``   (causal, the default)

    ``N`` is :func:`matmul_params` (2 FLOPs per multiply-add, x3 with the backward pass).
    The second term is the QK^T and attention-times-V matmuls: ``12 N_h H T`` for full
    attention, halved because a causal model only needs the lower triangle and the fused
    kernels compute only that (``causal=False`` gives PaLM's un-halved count). Recomputed
    activations (remat) and packing's unused cross-document blocks are not credited, so
    MFU is model FLOPs utilisation, not hardware utilisation. Inference (forward only) is
    one third.
    """

    t = cfg.max_seq_len if seq_len is None else seq_len
    attn = attention_flops_per_token(cfg.n_heads, cfg.head_dim, t, causal=causal)
    return 6.0 * matmul_params(cfg) + cfg.n_layers * attn


def _saved_values_per_token(cfg: Any, policy: str) -> float:
    """Activation values kept per token per layer for the backward pass (rough)."""
    q = cfg.n_heads * cfg.head_dim
    kv = cfg.n_kv_heads * cfg.head_dim
    sizes = {
        "query": q, "key": kv, "value": kv, "attn_context": q, "attn_out": cfg.dim,
        "mlp_gate": cfg.ffn_dim, "mlp_up": cfg.ffn_dim, "mlp_out": cfg.dim,
    }
    block_input = cfg.dim
    if policy == "none":
        # every named value plus norms' inputs, the SwiGLU product and f32 norm copies
        return block_input + sum(sizes.values()) + cfg.ffn_dim + 4 * cfg.dim
    if policy == "dots":
        return block_input + sum(sizes.values())

    names = saved_names(policy) or ()
    return block_input + sum(sizes[n] for n in names)


def estimate_train_memory_gb(
    cfg: Any, *, tokens_per_device: int, devices: int = 1, policy: str | None = None,
    optimizer_moments: int = 2, loss_chunk: int = 1024,
) -> float:
    """Per-device training memory estimate in GiB: float32 params, gradients and optimizer
    moments sharded over ``devices`` (FSDP), bf16 saved activations for the backward pass,
    one recomputed block's working set and one loss chunk of float32 logits.

    It is a planning estimate (XLA's buffer assignment adds 10-30%), used to pick the
    default remat policy per size and checked against XLA's own figure in the tests.
    """
    policy = cfg.remat if policy is None else policy
    n = param_counts(cfg)["total"]
    states = n * 4 * (2 + optimizer_moments) / devices  # params + grads + moments, f32
    saved = _saved_values_per_token(cfg, policy) * cfg.n_layers * tokens_per_device * 2
    working = _saved_values_per_token(cfg, "none") * tokens_per_device * 2  # one block live
    seqs = max(tokens_per_device // max(cfg.max_seq_len, 1), 1)
    logits = seqs * min(loss_chunk, cfg.max_seq_len) * cfg.vocab_size * 4 * 2  # f32 + grad
    return (states + saved + working + logits) / 2**30
