"""Beam pipelines (curate, dedup, decontaminate, tokenize): the wiring; logic lives in filters/."""

import logging as _logging


class _BeamImportNoise(_logging.Filter):
    """Beam logs "apitools not found ... bigquery client libraries" on the root logger at
    import time whenever some google-* package is installed without its GCP extra. It is
    about BigQuery, which afm never uses (Dataflow submission installs the extra), so it
    is dropped here instead of greeting every `afm curate` run."""

    def filter(self, record: _logging.LogRecord) -> bool:
        return not str(record.msg).startswith("apitools not found")


_logging.getLogger().addFilter(_BeamImportNoise())
