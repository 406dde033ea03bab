"""numpy's arrays in ordinary pages while census reads the operations (census.heap.small_pages):
numpy's madvise for transparent huge pages off meanwhile, as it was afterwards."""

from __future__ import annotations

import numpy as np
import pytest

from census.heap import small_pages

_MULTIARRAY = np._core.multiarray


@pytest.mark.parametrize("was", [True, False])
def test_small_pages_meanwhile_and_as_before_after(was: bool) -> None:
    before = _MULTIARRAY._set_madvise_hugepage(was)
    try:
        with small_pages():
            assert _MULTIARRAY._get_madvise_hugepage() is False
        assert _MULTIARRAY._get_madvise_hugepage() is was
        with pytest.raises(KeyError), small_pages():
            raise KeyError
        assert _MULTIARRAY._get_madvise_hugepage() is was
    finally:
        _MULTIARRAY._set_madvise_hugepage(before)
