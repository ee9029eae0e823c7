"""afm.training: one training engine for every task (pre-training first): streaming loader,
AFM optimizer, muParam, sharding, Orbax checkpoints with elastic resume, stages.
Entry point: ``afm.training.runs.train.train`` (the one front door: a stage name or file ->
config and task -> the loop, ``afm.training.core.trainer.run_loop`` -> the task's finish);
the task protocol: ``afm.training.core.task``."""
