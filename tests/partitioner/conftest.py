"""Shared set-up of the partitioner tests.

The test modules import their helpers as ``spec_factory`` whatever pytest's import mode
(``--import-mode=importlib`` does not put test directories on ``sys.path``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
