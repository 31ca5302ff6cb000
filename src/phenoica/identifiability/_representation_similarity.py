"""Symmetric similarities of two embeddings of the same images: linear CKA and mutual kNN."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.neighbors import NearestNeighbors

from phenoica.identifiability._alignment import CrossProducts, check_embedding_pair


def cka_from_cross_products(cross: CrossProducts) -> float:
    """Linear CKA of a pair from its centered scatters (:class:`CrossProducts`, the data read once):
    ``||A^T B||_F^2 / (||A^T A||_F ||B^T B||_F)``."""
    denom = float(np.linalg.norm(cross.aa) * np.linalg.norm(cross.bb))
    if denom <= 0:
        raise ValueError("linear CKA is undefined: A or B is constant over the rows given")
    return float(np.sum(cross.ab * cross.ab) / denom)


def linear_cka(A: Any, B: Any) -> float:
    """Linear centered kernel alignment of two embeddings of the same rows (Kornblith et al. 2019).

    Invariant to orthogonal transforms and isotropic scaling of either side; 1 for identical
    inputs; for one dimension each it is the squared Pearson correlation.
    """
    A, B = check_embedding_pair(A, B)
    if A.shape[0] < 2:
        raise ValueError(f"linear CKA needs at least 2 rows, got {A.shape[0]}")
    return cka_from_cross_products(CrossProducts.of(A, B))


def mutual_knn(A: Any, B: Any, k: int = 10) -> float:
    """Mean overlap of each row's k nearest neighbours in A and in B (Euclidean; self excluded).

    ``mean_i |N_A(i) & N_B(i)| / k``, in [0, 1]; 1 for identical inputs. Exact neighbours
    (scikit-learn ``NearestNeighbors``), O(N^2 D): subsample large inputs first.
    """
    A, B = check_embedding_pair(A, B)
    n = A.shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n - 1:
        raise ValueError(f"mutual_knn: k must be an integer in [1, n_rows - 1] = [1, {n - 1}], got {k!r}")
    na = NearestNeighbors(n_neighbors=k).fit(A).kneighbors(return_distance=False)
    nb = NearestNeighbors(n_neighbors=k).fit(B).kneighbors(return_distance=False)
    both = np.sort(np.concatenate([na, nb], axis=1), axis=1)
    shared = (np.diff(both, axis=1) == 0).sum(axis=1)
    return float(shared.mean() / k)
