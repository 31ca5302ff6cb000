"""Table 1 of Nelson et al. 2026: every map's held-out error, the ICA efficiency, CKA and mutual kNN of one model pair, and the table over pairs."""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import check_matrix
from phenoica.identifiability._alignment import (
    MAPS,
    PERMUTATION_MATCHES,
    AffineMap,
    CrossProducts,
    ICAMap,
    LinearMap,
    PermutationMap,
    RigidMap,
    check_embedding_pair,
)
from phenoica.identifiability._diameter import DIAMETER_METHODS, latent_diameter
from phenoica.identifiability._options import Table1Options
from phenoica.identifiability._representation_similarity import cka_from_cross_products, mutual_knn
from phenoica.utils import derive_seed

#: Columns of :func:`alignment_table`, in order (Table 1 first, then supporting numbers).
TABLE_COLUMNS: tuple[str, ...] = (
    "model_a",
    "model_b",
    "perm",
    "rigid",
    "linear",
    "ica",
    "ica_efficiency",
    "cka",
    "mutual_knn",
    "n_train",
    "n_test",
    "diameter",
    "rms_train_permutation",
    "rms_train_rigid",
    "rms_train_linear",
    "ica_converged",
)

LOG = logging.getLogger(__name__)


def _check_maps(maps: Sequence[str]) -> list[str]:
    """Known, unique map names, in the given order."""
    maps = [maps] if isinstance(maps, str) else list(maps)
    unknown = [m for m in maps if m not in MAPS]
    if unknown or not maps or len(set(maps)) != len(maps):
        raise ValueError(f"maps: expected distinct names among {MAPS}, got {maps}")
    return maps


def split_rows(n: int, train_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into sorted training and held-out row indices.

    ``round(train_fraction * n)`` training rows; at least 3 training and 2 held-out rows are
    required (an error says how many the fraction gives).
    """
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    n_train = int(round(train_fraction * n))
    if n_train < 3 or n - n_train < 2:
        raise ValueError(
            f"{n} images with train_fraction={train_fraction} give {n_train} training and {n - n_train} "
            f"held-out rows; alignment needs at least 3 training and 2 held-out rows"
        )
    order = np.random.default_rng(derive_seed(seed, "align", "split")).permutation(n)
    return np.sort(order[:n_train]), np.sort(order[n_train:])


def _resolve_diameter(B: np.ndarray, diameter: str | float, seed: int) -> float:
    """A given positive number, or the diameter of all of B by ``diameter`` method."""
    if isinstance(diameter, str):
        value = latent_diameter(B, diameter, derive_seed(seed, "align", "diameter"))
    elif isinstance(diameter, (int, float, np.number)) and not isinstance(diameter, bool):
        value = float(diameter)
    else:
        raise ValueError(f"diameter: expected a positive number or one of {DIAMETER_METHODS}, got {diameter!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"diameter of B must be a positive finite number, got {value} (are all of B's rows equal?)")
    return value


@dataclass(frozen=True, kw_only=True)
class AlignOptions:
    """How a pair of models is aligned (see the package docstring for every choice).

    ``maps`` are fitted on a seeded ``train_fraction`` of the rows (``seed`` also seeds ICA and
    the mutual-kNN subsample). ``ridge`` applies to the linear map, ``scale`` to the rigid map,
    ``permutation_match`` to the permutation map; ``n_components``, ``ica_method`` (required
    when ``ica`` is among the maps), ``ica_max_iter``, ``ica_tol`` and ``ica_max_samples`` to the
    ICA map. ``diameter``: "auto", "exact", "estimate", or a number (e.g. computed once per
    model). ``knn_k=None`` skips mutual kNN, which uses at most ``knn_max_samples`` rows. The
    workflow's options come from its config (:meth:`for_variant`), which states the defaults of
    ``train_fraction``, ``seed``, ``ica_method`` and ``knn_k``.
    """

    train_fraction: float
    seed: int
    knn_k: int | None
    maps: Sequence[str] = MAPS
    ica_method: str | None = None
    n_components: int | float | str | None = None
    ridge: float = 0.0
    scale: bool = False
    diameter: str | float = "auto"
    permutation_match: str = "correlation"
    ica_max_iter: int = 500
    ica_tol: float = 1e-7
    ica_max_samples: int | None = None
    knn_max_samples: int | None = 5000

    @classmethod
    def for_variant(cls, options: Table1Options, variant: str) -> AlignOptions:
        """The workflow's options for one variant, from the ``align`` rule's :class:`Table1Options`.

        Whitened variants have identity covariance: a variance rule (parallel analysis) cannot
        tell signal from noise there, so their ICA keeps every dimension.
        """
        return cls(
            train_fraction=options.train_fraction,
            seed=options.seed,
            ica_method=options.ica,
            n_components=options.ica_components if variant == "base" else None,
            ica_max_samples=options.ica_max_samples,
            knn_k=options.knn_k,
        )


def _empty_result(diam: float, train: np.ndarray, test: np.ndarray) -> dict[str, Any]:
    nan = float("nan")
    out: dict[str, Any] = {m: nan for m in MAPS}
    out.update(
        ica_efficiency=nan,
        cka=nan,
        mutual_knn=nan,
        diameter=diam,
        n_train=int(train.size),
        n_test=int(test.size),
        rms_train_permutation=nan,
        rms_train_rigid=nan,
        rms_train_linear=nan,
    )
    return out


def _supervised_maps(
    A: np.ndarray, B: np.ndarray, split: tuple[np.ndarray, np.ndarray], cross: CrossProducts, diam: float,
    opts: AlignOptions, out: dict[str, Any],
) -> None:  # fmt: skip
    """Held-out and training errors of the permutation, rigid and linear maps, into ``out``."""
    train, test = split

    def heldout(m: AffineMap) -> float:
        return float(m.row_errors(A, B, test).mean() / diam)

    def rms_train(m: AffineMap) -> float:
        e = m.row_errors(A, B, train)
        return float(np.sqrt(np.mean(e * e)) / diam)

    if "permutation" in opts.maps:
        perm = PermutationMap(opts.permutation_match).fit_cross(cross)
        out["permutation"] = heldout(perm)
        if opts.permutation_match != "least_squares":
            perm = PermutationMap("least_squares").fit_cross(cross)
        out["rms_train_permutation"] = rms_train(perm)
    if "rigid" in opts.maps:
        rigid = RigidMap(scale=opts.scale).fit_cross(cross)
        out["rigid"] = heldout(rigid)
        out["rms_train_rigid"] = rms_train(rigid)
    if "linear" in opts.maps:
        linear = LinearMap(opts.ridge).fit_cross(cross)
        out["linear"] = heldout(linear)
        if opts.ridge != 0:
            linear = LinearMap(0.0).fit_cross(cross)
        out["rms_train_linear"] = rms_train(linear)


def _ica_map(
    A: np.ndarray, B: np.ndarray, split: tuple[np.ndarray, np.ndarray], cross: CrossProducts, diam: float,
    opts: AlignOptions, out: dict[str, Any],
) -> None:  # fmt: skip
    """The unsupervised ICA map's held-out error and the ICA efficiency, into ``out``."""
    train, test = split
    ica = ICAMap(
        opts.n_components, opts.ica_method, opts.ica_max_iter, opts.ica_tol, opts.ica_max_samples,
        seed=derive_seed(opts.seed, "align", "ica"),
    ).fit(A[train], B[train], cross)  # fmt: skip
    out["ica"] = float(ica.row_errors(A, B, test).mean() / diam)
    out["ica_converged"] = ica.converged_
    out["ica_components_a"] = int(ica.whitener_a_.n_components_)
    out["ica_components_b"] = int(ica.whitener_b_.n_components_)
    gap = out["permutation"] - out["rigid"]
    if math.isfinite(gap) and gap > 1e-12:
        out["ica_efficiency"] = float((out["permutation"] - out["ica"]) / gap)


def align_errors(A: Any, B: Any, options: AlignOptions) -> dict[str, Any]:
    """Table-1 alignment errors of model A's embeddings to model B's (same images, row for row).

    Maps in ``options.maps`` are fitted on a seeded training share of the rows and scored on the
    rest as mean l2 error / diameter of all of B (:class:`AlignOptions`; the package docstring
    states every choice).

    Returns a dict: ``permutation``, ``rigid``, ``linear``, ``ica`` (held-out errors; NaN for
    maps not run), ``ica_efficiency``, ``cka``, ``mutual_knn``, ``diameter``, ``n_train``,
    ``n_test``, ``rms_train_permutation``, ``rms_train_rigid``, ``rms_train_linear`` (training
    RMS / diameter of each class's least-squares optimum, so linear <= rigid <= permutation),
    and ``ica_converged``, ``ica_components_a``, ``ica_components_b`` when ICA ran.
    """
    A, B = check_embedding_pair(A, B)
    opts = replace(options, maps=_check_maps(options.maps))
    if opts.permutation_match not in PERMUTATION_MATCHES:
        raise ValueError(f"permutation_match must be one of {PERMUTATION_MATCHES}, got {opts.permutation_match!r}")
    if "ica" in opts.maps and opts.ica_method is None:
        raise ValueError("the ICA map needs ica_method (picard or fastica)")
    n = A.shape[0]
    train, test = split_rows(n, opts.train_fraction, opts.seed)
    if train.size <= max(A.shape[1], B.shape[1]):
        LOG.warning(
            "alignment: %d training rows for %d and %d dimensions; the linear map can interpolate the training rows",
            train.size,
            A.shape[1],
            B.shape[1],
        )
    diam = _resolve_diameter(B, opts.diameter, opts.seed)
    cross_train = CrossProducts.of(A, B, train)
    cross_all = cross_train.pooled(CrossProducts.of(A, B, test))
    out = _empty_result(diam, train, test)
    _supervised_maps(A, B, (train, test), cross_train, diam, opts, out)
    if "ica" in opts.maps:
        _ica_map(A, B, (train, test), cross_train, diam, opts, out)
    out["cka"] = cka_from_cross_products(cross_all)
    if opts.knn_k is not None:
        rows = np.arange(n)
        if opts.knn_max_samples is not None and n > opts.knn_max_samples:
            rows = np.sort(
                np.random.default_rng(derive_seed(opts.seed, "align", "knn")).choice(
                    n, opts.knn_max_samples, replace=False
                )
            )
        out["mutual_knn"] = mutual_knn(A[rows], B[rows], opts.knn_k)
    return out


def alignment_table(
    embeddings: Mapping[str, Any],
    options: AlignOptions,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """Table 1 for several models' embeddings of the same images: one row per ORDERED pair.

    ``embeddings``: model name -> (N x D_model) array, rows the same images in the same order.
    ``pairs``: (model_a, model_b) tuples, the map going a -> b; default every ordered pair of
    distinct models (maps are directional and scored on B's diameter, so a -> b and b -> a
    differ). ``options`` go to :func:`align_errors`; the same seed gives every pair the same split.
    Each model's diameter is computed once. Columns: :data:`TABLE_COLUMNS` (``perm`` is the
    permutation error; ``diameter`` is model_b's; ``ica_converged`` is None when ICA did not run).
    """
    names = list(embeddings)
    if pairs is None:
        if len(names) < 2:
            raise ValueError(f"alignment_table: needs at least two models, got {names}")
        pairs = list(itertools.permutations(names, 2))
    pairs = [tuple(p) for p in pairs]
    for p in pairs:
        if len(p) != 2 or any(m not in embeddings for m in p):
            raise ValueError(f"alignment_table: pair {p!r} must name two models among {names}")
    arrays = {m: check_matrix(embeddings[m], f"embeddings of model {m!r}") for m in {m for p in pairs for m in p}}
    sizes = {m: a.shape[0] for m, a in arrays.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"alignment_table: every model must embed the same images; rows per model: {sizes}")
    diameters: dict[str, float] = {}
    rows = []
    for a, b in pairs:
        if b not in diameters:
            diameters[b] = _resolve_diameter(arrays[b], options.diameter, options.seed)
        LOG.info("alignment %s -> %s", a, b)
        res = align_errors(arrays[a], arrays[b], replace(options, diameter=diameters[b]))
        rows.append(
            {"model_a": a, "model_b": b, "perm": res["permutation"], **{k: res.get(k) for k in TABLE_COLUMNS[3:]}}
        )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
