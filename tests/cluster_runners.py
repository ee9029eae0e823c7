"""What the cluster runners' dry runs share (``afm fetch`` and ``afm curate --urls``): each
runner's options in the README's forms, and a work directory the workers see with a URL list."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

EXTERNAL = ["--environment_type", "EXTERNAL", "--environment_config", "localhost:50000"]
RUNNERS = {
    "DataflowRunner": ["--project", "my-project", "--region", "us-central1", "--temp_location",
                       "gs://my-bucket/tmp", "--sdk_container_image",
                       "us-docker.pkg.dev/my-project/afm/curate:latest"],
    "FlinkRunner": ["--job_endpoint", "localhost:8099", *EXTERNAL],
    "SparkRunner": ["--job_endpoint=localhost:8099", *EXTERNAL],
    "PortableRunner": ["--job_endpoint=localhost:8099", *EXTERNAL],
}


def url_list_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Storage the workers see (not the launcher's temporary directory, which cluster
    runners refuse), with a URL list."""
    work = tmp_path / "shared"
    work.mkdir()
    (work / "urls.txt").write_text("http://example.com/a\nhttp://example.org/b\n")
    launcher_tmp = tmp_path / "launcher-tmp"
    launcher_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(launcher_tmp))
    monkeypatch.chdir(work)
    return work
