"""The shared array checks: row chunks, non-finite columns, check_matrix."""

from __future__ import annotations

import numpy as np
import pytest

from phenoica.contract import ScreenError, check_finite, check_matrix
from phenoica.contract._arrays import first_nonfinite_row, nonfinite_columns
from phenoica.utils import CHUNK_ROWS, row_chunks


def test_row_chunks_cover_counts_and_index_arrays_once():
    slices = list(row_chunks(2 * CHUNK_ROWS + 5))
    assert [(s.start, s.stop) for s in slices] == [
        (0, CHUNK_ROWS),
        (CHUNK_ROWS, 2 * CHUNK_ROWS),
        (2 * CHUNK_ROWS, 2 * CHUNK_ROWS + 5),
    ]
    idx = np.array([9, 3, 7, 1, 0])
    parts = list(row_chunks(idx, size=2))
    assert [p.tolist() for p in parts] == [[9, 3], [7, 1], [0]]
    assert list(row_chunks(0)) == []
    with pytest.raises(ValueError, match="size must be >= 1"):
        list(row_chunks(5, size=0))


def test_nonfinite_columns_found_across_chunks_and_named_with_first_row():
    X = np.zeros((3 * CHUNK_ROWS, 4), dtype=np.float32)
    X[2 * CHUNK_ROWS + 7, 2] = np.nan  # in the third chunk
    X[CHUNK_ROWS + 1, 0] = -np.inf
    names = ["a", "b", "c", "d"]
    assert nonfinite_columns(X, names) == ["a", "c"]
    assert nonfinite_columns(np.ones((5, 4)), names) == []
    with pytest.raises(ScreenError, match=rf"t: non-finite.*\['a', 'c'\] \(2 in all; first at row {CHUNK_ROWS + 1}\)"):
        check_finite(X, "t", names)
    check_finite(np.arange(6).reshape(3, 2), "ints")  # integers are always finite


def test_first_nonfinite_row_and_row_labels():
    X = np.zeros((2 * CHUNK_ROWS, 3), dtype=np.float32)
    assert first_nonfinite_row(X) is None and first_nonfinite_row(np.zeros((0, 3))) is None
    X[CHUNK_ROWS + 4, 1], X[CHUNK_ROWS + 9, 0] = np.inf, np.nan  # in the second chunk
    assert first_nonfinite_row(X) == CHUNK_ROWS + 4
    big = np.full((3, 2), 1e308)  # finite values whose float64 sum overflows: still finite
    assert first_nonfinite_row(big) is None
    check_finite(big, "big")
    images = np.zeros((5, 2, 4, 4), dtype=np.float64)  # one row per image
    images[3, 1, 2, 0] = -np.inf
    assert first_nonfinite_row(images) == 3
    assert first_nonfinite_row(np.arange(6).reshape(3, 2)) is None  # integers are always finite
    with pytest.raises(ScreenError, match=r"^P1.zarr: image 3 is bad$"):
        check_finite(images, "P1.zarr", row_label=lambda i: f"image {i} is bad")
    check_finite(np.ones((2, 3)), "fine", row_label=lambda i: f"image {i}")


def test_check_matrix_says_what_was_expected():
    assert check_matrix(np.arange(6).reshape(3, 2)).dtype == np.float64
    X = np.ones((3, 2), dtype=np.float32)
    assert check_matrix(X) is X  # float input: no copy
    with pytest.raises(ValueError, match="expected a 2-D array"):
        check_matrix(np.ones(3), "v")
    with pytest.raises(ValueError, match="at least one row"):
        check_matrix(np.ones((0, 3)))
    with pytest.raises(ValueError, match="numeric"):
        check_matrix(np.array([["a"]]))
    with pytest.raises(ValueError, match="has 2 features, the transform was fitted on 3"):
        check_matrix(X, n_features=3)
    X[1, 1] = np.inf
    with pytest.raises(ScreenError, match=r"feature 1"):
        check_matrix(X)
