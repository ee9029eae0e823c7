"""The afm adapter directory: one LoRA adapter, its config, and the base it belongs to.

Layout (``afm-lora-v1``)::

    ADAPTER/
      adapter.json          # format, LoRA config, value dtype, base checkpoint path and
                            # config, provenance (task, steps, data), number of parameters
      adapter.safetensors   # layers.I.attn.wq.lora_a [*in, r] / .lora_b [r, *out], 16-bit

Values are stored in 16 bits (float16 by default, as the report ships adapters; bfloat16
or float32 on request), so a rank-16 adapter of the 3B on-device model is tens of MB.
An adapter directory is also a *model* path: :func:`afm.model.checkpoints.checkpoint.load_model`
given one loads the base and attaches the adapter, so ``afm eval``, ``afm generate`` and
``afm score`` take adapters like checkpoints. The Hugging Face PEFT export is
``afm.model.checkpoints.hf_export.export_peft``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from afm.model.config import ModelConfig
from afm.model.on_device.lora import Adapter, LoraConfig

FORMAT = "afm-lora-v1"
CONFIG_FILE = "adapter.json"
WEIGHTS_FILE = "adapter.safetensors"
VALUE_DTYPES = ("float16", "bfloat16", "float32")


def is_adapter_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / CONFIG_FILE).is_file()


def _np_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def _key(path: str, part: str) -> str:
    return path.replace("/", ".") + f".lora_{part}"


def save_adapter(
    adapter: Adapter,
    out: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str],
    base_config: ModelConfig,
    dtype: str = "float16",
    overwrite: bool = False,
) -> Path:
    """Write ``adapter`` to ``out`` (values cast to ``dtype``)."""
    from safetensors.numpy import save_file

    if dtype not in VALUE_DTYPES:
        raise ValueError(f"adapter dtype must be one of {VALUE_DTYPES}, got {dtype!r}")
    adapter.check_fits(base_config)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} exists and is not empty (pass --overwrite)")
        for name in (CONFIG_FILE, WEIGHTS_FILE):
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    np_dtype = _np_dtype(dtype)
    tensors = {}
    for path, (a, b) in sorted(adapter.weights.items()):
        tensors[_key(path, "a")] = np.ascontiguousarray(np.asarray(a, np.float32).astype(np_dtype))
        tensors[_key(path, "b")] = np.ascontiguousarray(np.asarray(b, np.float32).astype(np_dtype))
    tmp = out / f".{WEIGHTS_FILE}.tmp"
    save_file(tensors, str(tmp), metadata={"format": FORMAT})
    os.replace(tmp, out / WEIGHTS_FILE)
    meta = {
        "format": FORMAT,
        "lora": adapter.config.to_dict(),
        "dtype": dtype,
        "base": os.path.abspath(os.fspath(base)),
        "base_config": base_config.to_dict(),
        "num_params": adapter.num_params,
        "megabytes": adapter.num_params * np.dtype(np_dtype).itemsize / 1e6,
        **({"meta": adapter.meta} if adapter.meta else {}),
    }
    (out / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return out


def read_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    meta_path = Path(path) / CONFIG_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"not an afm adapter (no {CONFIG_FILE}): {path}")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: unknown adapter format {meta.get('format')!r}")
    return meta


def load_adapter(path: str | os.PathLike[str]) -> tuple[Adapter, dict[str, Any]]:
    """The adapter (float32 host arrays of the stored 16-bit values) and its metadata."""
    from safetensors.numpy import load_file

    meta = read_meta(path)
    config = LoraConfig.from_dict(meta["lora"])
    weights_path = Path(path) / WEIGHTS_FILE
    if not weights_path.is_file():
        raise FileNotFoundError(f"{path}: {WEIGHTS_FILE} is missing")
    tensors = load_file(str(weights_path))
    base_cfg = ModelConfig.from_dict(meta["base_config"])
    weights = {}
    for p in config.weight_paths(base_cfg.n_layers):
        try:
            weights[p] = (np.asarray(tensors[_key(p, "a")], np.float32), np.asarray(tensors[_key(p, "b")], np.float32))
        except KeyError:
            raise ValueError(f"{weights_path}: lacks the weights of {p}") from None
    adapter = Adapter(config, weights, dict(meta.get("meta", {})))
    adapter.check_fits(base_cfg)
    return adapter, meta


def resolve_base(path: str | os.PathLike[str], meta: dict[str, Any], base: str | None = None) -> str:
    """The base checkpoint of an adapter: ``base`` if given, else the recorded path, else
    the recorded path's last component next to the adapter (moved trees keep working)."""
    if base:
        return os.fspath(base)
    recorded = meta["base"]
    if Path(recorded).exists():
        return recorded
    sibling = Path(path).parent / Path(recorded).name
    if sibling.exists():
        return str(sibling)
    raise FileNotFoundError(f"adapter {path}: its base {recorded} is gone (pass the base checkpoint explicitly)")
