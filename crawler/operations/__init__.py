"""Watching a running crawler: the stats line and heartbeat, /metrics and /healthz, and the client that reads them (``afm crawler status``)."""
