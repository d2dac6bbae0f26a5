"""A column of texts held as codes into its distinct values: a recorded log's entity and event ids (:mod:`local.recorded`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


class Texts(Sequence[str]):
    """A column of texts held as codes into its distinct values (a log's entity or event ids, one per row).

    A Python string per row costs ~60 bytes; a 10M-row log's two id columns took ~1.2 GB that way. Rows are
    ``values[codes[i]]``, or ``prefix + str(codes[i])`` when ``values`` is None (the ``<file>:<line>`` ids).
    """

    def __init__(self, codes: IntArray, values: tuple[str, ...] | None = None, prefix: str = "") -> None:
        self.codes, self.values, self.prefix = codes, values, prefix

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return Texts(self.codes[i], self.values, self.prefix)
        code = int(self.codes[i])
        return self.prefix + str(code) if self.values is None else self.values[code]

    def take(self, rows: IntArray) -> Texts:
        """The texts of ``rows``, in that order."""
        return Texts(self.codes[rows], self.values, self.prefix)

    def distinct(self) -> int:
        """How many different texts the column holds."""
        return len(np.unique(self.codes))
