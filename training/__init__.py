"""afm.training: one training engine for every task (pre-training first): streaming loader,
AFM optimizer, muParam, sharding, Orbax checkpoints with elastic resume, stages.
Entry point: ``afm.training.core.trainer.train``; the task protocol: ``afm.training.core.task``."""
