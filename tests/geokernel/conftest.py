"""Shared set-up of the kernel tests.

The test modules import their helper as ``spec_factory`` whatever pytest's import mode (``--import-mode=importlib``
does not put test directories on ``sys.path``); the partitioner tests use it too (``tests/partitioner/conftest.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
