"""Entry point of ``python -m georebal``: :func:`georebal.launch.run` (the CLI, :mod:`georebal.cli`, or one line
naming what it cannot run without)."""

from georebal.launch import run

run()
