"""Model checkpoints: parameters with Orbax, the config as JSON beside them.

Layout of a checkpoint directory::

    CKPT/
      config.json   # ModelConfig.to_dict() (+ format marker)
      params/       # Orbax StandardCheckpointer tree: a plain nested dict of arrays
                    # (nnx.State.to_pure_dict of the model's nnx.Param variables)

The parameter tree does not depend on ``scan_layers`` or ``remat`` (run-time choices), so
one checkpoint loads under any of them. ``afm.training`` keeps its own step checkpoints
(optimizer state and all); this format is the hand-off between stages and to export.
Paths may be local or on an object store (``gs://``): they go through ``etils.epath``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import jax
from etils import epath
from flax import nnx

from afm import fs
from afm.errors import UserError
from afm.model.checkpoints.adapter_io import is_adapter_dir, load_adapter, resolve_base
from afm.model.config import ModelConfig, check_fits
from afm.model.on_device import lora
from afm.model.transformer import Transformer

Path = epath.Path


def _path(path: str | os.PathLike[str]) -> epath.Path:
    text = os.fspath(path)
    return epath.Path(text if fs.is_remote(text) else os.path.abspath(fs.local(text)))

FORMAT = "afm-model-v1"


def _pure_params(model_or_state: Transformer | nnx.State | dict) -> dict:
    if isinstance(model_or_state, nnx.Module):
        return nnx.to_pure_dict(nnx.state(model_or_state, nnx.Param))
    if isinstance(model_or_state, nnx.State):
        return nnx.to_pure_dict(model_or_state)
    if isinstance(model_or_state, dict):
        return model_or_state
    raise TypeError(f"save_params: expected a Transformer, nnx.State or dict, got {type(model_or_state)}")


def save_params(
    model_or_state: Transformer | nnx.State | dict,
    path: str | os.PathLike[str],
    cfg: ModelConfig | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Write ``path/params`` (Orbax) and ``path/config.json``. ``cfg`` is required unless a
    :class:`Transformer` is given. Refuses to overwrite unless ``overwrite``."""
    path = _path(path)
    if cfg is None:
        if not isinstance(model_or_state, Transformer):
            raise ValueError("save_params: pass cfg= when saving a bare state")
        cfg = model_or_state.cfg
    if path.exists():
        if not overwrite:
            raise FileExistsError(f"checkpoint exists: {path} (pass overwrite=True)")
        path.rmtree()
    path.mkdir(parents=True)
    params = _pure_params(model_or_state)
    ckptr = _checkpointer()
    ckptr.save(path / "params", params)
    ckptr.wait_until_finished()
    meta = {"format": FORMAT, "config": cfg.to_dict()}
    (path / "config.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def _checkpointer() -> Any:
    import orbax.checkpoint as ocp

    return ocp.StandardCheckpointer()


class CheckpointError(UserError):
    """A checkpoint that cannot be read, as one line: which directory and what is wrong."""


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()).split(" See full TensorStore details")[0]
    return text[:300] + ("..." if len(text) > 300 else "")


def _quiet_stale_reads() -> None:
    """After a failed restore, reads still in flight complete into the closed event loop
    of the checkpointer (or are collected at exit) and print "Event loop is closed" /
    "coroutine ... was never awaited" tracebacks from background threads: noise after an
    error already reported in one line. Drop exactly those, from Orbax's reads."""
    import sys
    import threading

    def stale(exc: BaseException | None, obj: Any = None) -> bool:
        text = str(exc)
        return (isinstance(exc, RuntimeError) and "Event loop is closed" in text) or (
            isinstance(exc, ImportError) and "shutting down" in text) or (
            "orbax" in str(getattr(getattr(obj, "cr_code", None), "co_filename", "")))

    import logging

    # the reads' tasks that failed like the one reported: asyncio logs them at collection
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    previous_thread, previous_unraisable = threading.excepthook, sys.unraisablehook
    if getattr(previous_thread, "_afm_quiet", False):
        return

    def thread_hook(args: Any) -> None:
        if not stale(args.exc_value):
            previous_thread(args)

    def unraisable_hook(args: Any) -> None:
        if not stale(args.exc_value, args.object):
            previous_unraisable(args)

    thread_hook._afm_quiet = True  # type: ignore[attr-defined]
    threading.excepthook, sys.unraisablehook = thread_hook, unraisable_hook


def restore_tree(directory: Any, target: Any = None) -> Any:
    """The one reader of an Orbax parameter tree (every checkpoint afm writes holds one):
    ``directory`` restored into ``target``'s shapes and dtypes (and shardings) when given.
    The checkpointer is closed whatever happens, so no background thread outlives a
    failure, and every failure is a :class:`CheckpointError` naming the directory and the
    reason: missing, truncated or corrupt files, or shapes that do not fit ``target``."""
    directory = _path(directory)
    if not directory.exists():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    try:
        with _checkpointer() as ckptr:
            return ckptr.restore(directory, target) if target is not None else ckptr.restore(directory)
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - Orbax/TensorStore raise many kinds; all mean "unreadable"
        _quiet_stale_reads()
        text = _first_line(exc)
        if "shape" in text.lower() and ("compatible" in text.lower() or "mismatch" in text.lower()):
            shapes = re.search(r"[Rr]equested shape:? ?\(?[^)]*\)? is not compatible with the stored shape:? ?\(?[^)]*\)?",
                               text)
            raise CheckpointError(f"{directory}: its parameters do not fit this model "
                                  f"({shapes.group(0) if shapes else text})") from None
        raise CheckpointError(f"{directory}: cannot be read, damaged or incomplete "
                              f"({type(exc).__name__}: {text})") from None


def load_config(path: str | os.PathLike[str]) -> ModelConfig:
    meta_path = _path(path) / "config.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"not a model checkpoint (no config.json): {path}")
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            raise CheckpointError(f"{meta_path}: unknown checkpoint format {meta.get('format')!r}")
        return ModelConfig.from_dict(meta["config"])
    except CheckpointError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{meta_path}: not a valid model config ({type(exc).__name__}: "
                              f"{_first_line(exc)})") from None


def load_model(
    path: str | os.PathLike[str], **config_overrides: Any
) -> tuple[Transformer, ModelConfig]:
    """Rebuild the model from ``path``. ``config_overrides`` may change run-time fields
    (``dtype``, ``remat``, ``scan_layers``, ``attention_impl``, ``max_seq_len``,
    ``rope_base``) but not shapes.

    ``path`` may also be an adapter directory (``afm.model.checkpoints.adapter_io``): its base is
    loaded (dense or palettized) and the LoRA adapter attached; the config returned is
    the base's."""

    if not fs.is_remote(path) and is_adapter_dir(path):
        return load_adapted_model(path, **config_overrides)
    path = _path(path)
    cfg = load_config(path)
    if config_overrides:
        cfg = cfg.replace(**config_overrides)
    check_fits(cfg, f"loading {path}")
    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    target = nnx.to_pure_dict(nnx.state(abstract, nnx.Param))
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), target)
    restored = restore_tree(path / "params", target)
    nnx.replace_by_pure_dict(state, restored)
    return nnx.merge(graphdef, state), cfg


def load_params_into(model: Transformer, path: str | os.PathLike[str]) -> Transformer:
    """Load a checkpoint's parameters into an existing model of the same shapes."""
    target = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), target)
    restored = restore_tree(_path(path) / "params", target)
    state = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(state, restored)
    nnx.update(model, state)
    return model


def load_adapted_model(path: str | os.PathLike[str], *, base: str | None = None, **config_overrides: Any) -> tuple[Any, ModelConfig]:
    """The base model of the adapter at ``path`` with the adapter attached (unmerged)."""

    adapter, meta = load_adapter(path)
    model, cfg = load_model(resolve_base(path, meta, base), **config_overrides)
    recorded = ModelConfig.from_dict(meta["base_config"])
    shape_fields = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim")
    if any(getattr(recorded, f) != getattr(cfg, f) for f in shape_fields):
        raise ValueError(f"adapter {path} was trained on a model of another shape than its base")
    if recorded.palettization != cfg.palettization:
        raise ValueError(f"adapter {path} was trained on a base with other quantization than {meta['base']}")
    lora.attach(model, adapter)
    return model, cfg
