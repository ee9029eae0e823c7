"""afm.training: the pre-training engine (Grain data, AFM optimizer, muParam, sharding,
Orbax checkpoints, stages). Entry point: ``afm.training.trainer.train``."""
