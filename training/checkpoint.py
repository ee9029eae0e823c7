"""Orbax checkpoints of a training run: params, optimizer state, data position, meta.

One step directory holds four items:

* ``params``   flat ``{path: float32 array}`` (sharded save/restore, any mesh);
* ``opt_state`` the optimizer state's leaves as ``{"0": ..., "1": ...}`` in tree order
  (restored into the structure of a fresh ``opt.init``);
* ``data``     the Grain iterator state (JSON), so a resumed run sees the same batches;
* ``meta``     step, stage name, model config, ``params_sha256`` (JSON).

Saves are asynchronous (the step loop goes on while the arrays are written); ``wait``
blocks until the last one is durable (done before exiting and on SIGTERM).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

ITEMS = ("params", "opt_state", "data", "meta")


def _leaves_dict(tree: Any) -> dict[str, Any]:
    return {str(i): x for i, x in enumerate(jax.tree.leaves(tree))}


def _abstract(tree: Any) -> Any:
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree
    )


class Checkpointer:
    """A ``CheckpointManager`` over ``workdir/checkpoints`` with the items above."""

    def __init__(self, workdir: Path, *, keep: int = 3, async_save: bool = True):
        self.directory = Path(workdir).absolute() / "checkpoints"
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=async_save
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options, item_names=ITEMS)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def step_dir(self, step: int) -> Path:
        return self.directory / str(step)

    def save(self, step: int, params: dict[str, Any], opt_state: Any, data_state: str, meta: dict[str, Any]) -> None:
        self.manager.save(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                opt_state=ocp.args.StandardSave(_leaves_dict(opt_state)),
                data=ocp.args.JsonSave(json.loads(data_state)),
                meta=ocp.args.JsonSave(meta),
            ),
            force=True,
        )

    def restore(self, step: int, params_like: dict[str, Any], opt_state_like: Any) -> tuple[dict[str, Any], Any, str, dict[str, Any]]:
        """Restore ``step`` into the shardings/dtypes of the given (abstract) trees."""
        leaves_like, treedef = jax.tree.flatten(opt_state_like)
        out = self.manager.restore(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardRestore(_abstract(params_like)),
                opt_state=ocp.args.StandardRestore(_abstract(_leaves_dict(opt_state_like))),
                data=ocp.args.JsonRestore(),
                meta=ocp.args.JsonRestore(),
            ),
        )
        leaves = [out["opt_state"][str(i)] for i in range(len(leaves_like))]
        return out["params"], jax.tree.unflatten(treedef, leaves), json.dumps(out["data"]), out["meta"]

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


def resolve_init_from(path: str | Path) -> tuple[Path, int]:
    """A previous stage's workdir (latest step), its ``checkpoints`` dir, or a step dir."""
    p = Path(path).absolute()
    for candidate in (p / "checkpoints", p):
        if candidate.is_dir():
            steps = sorted(int(c.name) for c in candidate.iterdir() if c.name.isdigit() and (c / "params").exists())
            if steps:
                return candidate, steps[-1]
    if (p / "params").exists() and p.name.isdigit():
        return p.parent, int(p.name)
    raise FileNotFoundError(f"init_from {path}: no checkpoint found (expected a workdir, its checkpoints/ or a step dir)")


def _flatten_nested(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten_nested(v, f"{prefix}{k}/"))
        return out
    return {prefix[:-1]: tree}


def is_model_checkpoint(path: str | Path) -> bool:
    """An ``afm.model.checkpoint`` directory (``config.json`` + ``params/``)."""
    p = Path(path)
    return (p / "config.json").is_file() and (p / "params").is_dir()


def restore_model_checkpoint(path: str | Path, params_like: dict[str, Any], layout: Any) -> dict[str, Any]:
    """Parameters from an ``afm.model`` checkpoint, as this trainer's flat dict."""
    from flax import nnx

    target = nnx.to_pure_dict(layout.unflatten(_abstract(params_like)))
    restored = ocp.StandardCheckpointer().restore(Path(path).absolute() / "params", target)
    flat = _flatten_nested(restored)
    missing = set(params_like) - set(flat)
    if missing:
        raise ValueError(f"{path}: model checkpoint lacks parameters {sorted(missing)[:5]}")
    return {k: flat[k] for k in params_like}


def restore_params_only(
    path: str | Path, params_like: dict[str, Any], layout: Any = None
) -> tuple[dict[str, Any], Path]:
    """The parameters of the previous stage, resharded: a training workdir, its
    ``checkpoints/`` or a step dir, or an ``afm.model`` checkpoint (``workdir/model``)."""
    if is_model_checkpoint(path) and layout is not None:
        return restore_model_checkpoint(path, params_like, layout), Path(path)
    directory, step = resolve_init_from(path)
    step_dir = directory / str(step)
    params = ocp.StandardCheckpointer().restore(step_dir / "params", _abstract(params_like))
    return params, step_dir
