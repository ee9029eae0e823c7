"""The app: the top layer, above every area (``afm/areas.py``). The ``afm`` command and its
discovery, every command (``commands/<area>/``) and benchmark (``bench/<area>/``), the demo
and its bundled site, and the studies behind the experiments. Nothing below imports it."""
