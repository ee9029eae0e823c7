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
from typing import Any

import jax
from afm.model.config import ModelConfig
from afm.model.transformer import Transformer
from etils import epath
from flax import nnx

Path = epath.Path


def _path(path: str | os.PathLike[str]) -> epath.Path:
    text = os.fspath(path)
    return epath.Path(text if "://" in text else os.path.abspath(text))

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


def load_config(path: str | os.PathLike[str]) -> ModelConfig:
    meta_path = _path(path) / "config.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"not a model checkpoint (no config.json): {path}")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: unknown checkpoint format {meta.get('format')!r}")
    return ModelConfig.from_dict(meta["config"])


def load_model(
    path: str | os.PathLike[str], **config_overrides: Any
) -> tuple[Transformer, ModelConfig]:
    """Rebuild the model from ``path``. ``config_overrides`` may change run-time fields
    (``dtype``, ``remat``, ``scan_layers``, ``attention_impl``, ``max_seq_len``,
    ``rope_base``) but not shapes."""
    path = _path(path)
    cfg = load_config(path)
    if config_overrides:
        cfg = cfg.replace(**config_overrides)
    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    target = nnx.to_pure_dict(nnx.state(abstract, nnx.Param))
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), target)
    restored = _checkpointer().restore(path / "params", target)
    nnx.replace_by_pure_dict(state, restored)
    return nnx.merge(graphdef, state), cfg


def load_params_into(model: Transformer, path: str | os.PathLike[str]) -> Transformer:
    """Load a checkpoint's parameters into an existing model of the same shapes."""
    target = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), target)
    restored = _checkpointer().restore(_path(path) / "params", target)
    state = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(state, restored)
    nnx.update(model, state)
    return model
