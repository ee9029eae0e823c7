"""muParam (simple), Wortsman et al. 2023, as SPEC 3 fixes it: per-tensor LR multipliers.

The LR sweep is run on a proxy of width ``base_width`` (768). When the model is wider,
the learning rate of every *hidden* linear layer (attention q/k/v/o, FFN gate/up/down:
any tensor with two or more dimensions that is not the embedding) is multiplied by
``base_width / width``. The token embedding (tied with the output layer) and all norm
scales (1-D tensors) keep the base LR. Initialisation and the logit scale are the
model's business (``afm.model``); this module only decides the LR factors.

Classification uses the logical axis names the model attaches with
``nnx.with_partitioning`` ("vocab" marks the embedding, "norm" the norm scales) and
falls back to the parameter's path and rank when a tensor carries no names.
"""

from __future__ import annotations

from typing import Any

EMBEDDING = "embedding"
NORM = "norm"
HIDDEN = "hidden"


def classify(path: str, shape: tuple[int, ...], names: tuple[str | None, ...] | None) -> str:
    """One of ``embedding`` / ``norm`` / ``hidden`` for a parameter."""
    if names is not None and "vocab" in names:
        return EMBEDDING
    lowered = path.lower()
    if names is None and ("embed" in lowered.split("/")[-1] or "embedding" in lowered):
        return EMBEDDING
    if len(shape) <= 1 or (names is not None and "norm" in names) or "norm" in lowered:
        return NORM
    return HIDDEN


def lr_multipliers(
    shapes: dict[str, tuple[int, ...]],
    names: dict[str, tuple[str | None, ...] | None],
    *,
    width: int,
    base_width: int = 768,
) -> dict[str, float]:
    """Flat ``path -> LR factor``: ``base_width / width`` for hidden layers, else 1."""
    if width <= 0 or base_width <= 0:
        raise ValueError(f"widths must be positive (width={width}, base_width={base_width})")
    factor = base_width / width
    return {
        path: (factor if classify(path, tuple(shape), names.get(path)) == HIDDEN else 1.0)
        for path, shape in shapes.items()
    }


def describe(multipliers: dict[str, float], shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """Summary for the run log: how many tensors/params get which factor."""
    out: dict[str, Any] = {}
    for path, k in multipliers.items():
        n = 1
        for d in shapes[path]:
            n *= int(d)
        key = f"lr x {k:.4g}"
        tensors, params = out.get(key, (0, 0))
        out[key] = (tensors + 1, params + n)
    return {k: f"{t} tensors, {p:,} params" for k, (t, p) in sorted(out.items())}
