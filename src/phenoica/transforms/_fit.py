"""Fit the variants of a model's embeddings, from row blocks, an in-memory matrix or a profile table.

:func:`fit_variants_streaming` is the one fit: two passes over row blocks through the
estimators' public streaming API (``partial_fit`` / ``finalize``), memory independent of the
number of rows. :func:`fit_variants` runs it over row chunks of an in-memory matrix and
:func:`fit_transforms` over row batches of a profile parquet (or table), saving each variant.

The three whitened variants share one center-scale and one whitening, so they differ only by
the final rotation. Every random choice takes its seed from the workflow seed
(:func:`phenoica.utils.derive_seed` with keys ``("variants", purpose)``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from phenoica.contract import (
    CONTROL,
    MIN_COMPONENTS,
    PERT_TYPE,
    ScreenError,
    check_matrix,
    check_rows,
    column_labels,
)
from phenoica.transforms._accumulators import Moments, RowSample
from phenoica.transforms._options import TransformOptions
from phenoica.transforms._rotations import ICARotation, RandomRotation
from phenoica.transforms._rows import Profiles, RowBlock, profile_source, row_block, row_columns, source_features
from phenoica.transforms._scaling import CenterScale, CoralAlignment, check_batches, check_is_control
from phenoica.transforms._variant import VariantTransform
from phenoica.transforms._variant_names import VARIANTS, WHITENED_VARIANTS
from phenoica.transforms._whitening import PCAWhitener, whitened_moments
from phenoica.utils import atomic_path, derive_seed, row_chunks

LOG = logging.getLogger(__name__)

#: The seeded choices of a fit, each with its own seed ``derive_seed(seed, "variants", purpose)``:
#: the parallel-analysis subsample and permutations, the ICA row subsample, the ICA start, the
#: random rotation.
SEED_PURPOSES: tuple[str, ...] = ("whiten", "ica_rows", "ica", "rand", "tvn")


# --------------------------------------------------------------------------- seeds


def variant_seeds(seed: int) -> dict[str, int]:
    """The seed of every random choice of a fit (:data:`SEED_PURPOSES`), from the workflow seed."""
    return {purpose: derive_seed(seed, "variants", purpose) for purpose in SEED_PURPOSES}


# --------------------------------------------------------------------------- the streaming fit


@dataclass(frozen=True)
class _Blocks:
    """How the streaming fit reads each row block: the checks, and which rows it is fitted on."""

    names: list[str]
    source: str
    center: bool  # center-scale is fitted: every row's batch and control flag are needed
    on_controls: bool  # fit_on is 'controls'
    whitened: bool  # whitened variants are fitted (with fit_on controls: every row's control flag is needed)
    tvn: bool = False  # tvn is fitted: every row's batch and control flag are needed

    def checked(self, block: RowBlock) -> RowBlock:
        """The block's features (finite, numeric, the fitted width), batches and control flags."""
        X, batches, is_control = block
        X = check_matrix(X, self.source, len(self.names), self.names)
        m = X.shape[0]
        b = None if batches is None or not (self.center or self.tvn) else check_batches(batches, m)
        c = None if is_control is None else check_is_control(is_control, m)
        if self.center and (b is None or c is None):
            raise ValueError("center_scale is on: the batch and control flag of every row are needed")
        if self.tvn and (b is None or c is None):
            raise ValueError("variant tvn: the batch and control flag of every row are needed")
        if self.on_controls and self.whitened and c is None:
            raise ValueError("fit_on is 'controls': the control flag of every row is needed")
        return X, b, c

    def fit_rows(self, X: np.ndarray, is_control: np.ndarray | None) -> np.ndarray:
        """The rows the whitening and ICA are fitted on."""
        return X[is_control] if self.on_controls and is_control is not None else X


def _first_pass(
    blocks: Iterable[RowBlock], how: _Blocks, scaler: CenterScale | None
) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """Checks every block; (rows, fit rows, control rows, per-feature min and max over the fit
    rows); the center-scale (if any) accumulates each batch's control moments."""
    d = len(how.names)
    n = n_fit = n_ctrl = 0
    lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
    for block in blocks:
        if np.shape(block[0])[0] == 0:
            continue
        X, b, c = how.checked(block)
        n += X.shape[0]
        n_ctrl += 0 if c is None else int(c.sum())
        Xf = how.fit_rows(X, c)
        if Xf.shape[0]:
            n_fit += Xf.shape[0]
            lo = np.minimum(lo, Xf.min(axis=0))
            hi = np.maximum(hi, Xf.max(axis=0))
        if scaler is not None:
            scaler.partial_fit(X, b, c, how.names)
    return n, n_fit, n_ctrl, lo, hi


@dataclass
class _TvnRows:
    """What TVN accumulates in the second pass: its own whitener on the control rows (unless the
    shared one is fitted on controls) and each batch's control moments (full scatter), both in
    the center-scaled space."""

    whitener: PCAWhitener | None
    n_controls: int
    moments: dict[str, Moments]

    def add(self, Xc: np.ndarray, batches: np.ndarray, is_control: np.ndarray) -> None:
        for batch in np.unique(batches).tolist():  # every batch, so one without controls is named
            self.moments.setdefault(batch, Moments(Xc.shape[1]))
        controls = Xc[is_control]
        if not controls.shape[0]:
            return
        if self.whitener is not None:
            self.whitener.partial_fit(controls, n_total=self.n_controls)
        b = batches[is_control]
        for batch in np.unique(b).tolist():
            self.moments[batch].update(controls[b == batch])


def _second_pass(
    blocks: Iterable[RowBlock],
    how: _Blocks,
    scaler: CenterScale | None,
    whitener: PCAWhitener,
    n_fit: int,
    ica_rows: RowSample | None,
    tvn: _TvnRows | None = None,
) -> int:
    """Center-scaled fit rows -> the whitener (moments, parallel-analysis sample) and the ICA
    row sample; returns the fit rows seen."""
    seen = 0
    for block in blocks:
        if np.shape(block[0])[0] == 0:
            continue
        X, b, c = how.checked(block)
        Xc = X if scaler is None else scaler.transform(X, b)
        if tvn is not None:
            tvn.add(Xc, b, c)  # type: ignore[arg-type]
        Xw = how.fit_rows(Xc, c)
        if Xw.shape[0] == 0:
            continue
        seen += Xw.shape[0]
        whitener.partial_fit(Xw, n_total=n_fit)
        if ica_rows is not None:
            ica_rows.add(Xw)
    return seen


def _check_fit_rows(
    source: str, fit_on: str, names: Sequence[str], n: int, n_fit: int, lo: np.ndarray, hi: np.ndarray
) -> None:
    """What the first pass found, checked: rows, fit rows, no feature constant over the fit rows."""
    if n == 0:
        raise ScreenError(f"{source}: no rows to fit the transforms on")
    if n_fit == 0:
        raise ScreenError(f"{source}: fit_on is 'controls' but no row has {PERT_TYPE} == {CONTROL!r}")
    flat = np.flatnonzero(lo == hi)
    if flat.size:
        raise ScreenError(
            f"{source}: feature column(s) {column_labels(flat, names)} are constant over the {n_fit} "
            f"fit rows (fit_on {fit_on!r}); remove them before fitting transforms"
        )


def control_span_cap(n_controls: int, scaler: CenterScale | None) -> int:
    """The most whitened directions a fit on the control rows keeps: half the directions the
    controls span (``n_controls`` less one per batch each batch's centring removes), and at least
    :data:`phenoica.contract.MIN_COMPONENTS`.

    Why half. Every direction the controls do not span is one in which every control row sits at
    exactly zero and every other row does not: a whitening that keeps it hands a classifier a
    feature that tells any perturbation from the controls, and the pseudo-guides of the null,
    being control rows, stay at zero in it too, so the null cannot see it (every guide is called).
    Keeping at most half the spanned directions leaves each kept direction's variance estimated
    from at least two control rows' worth of variation and none an empty one.
    """
    groups = 1 if scaler is None else max(len(scaler.batches_), 1)
    return max(MIN_COMPONENTS, (int(n_controls) - groups) // 2)


def _tvn_rows(
    options: TransformOptions, seeds: Mapping[str, int], n_ctrl: int, source: str, scaler: CenterScale | None
) -> _TvnRows:
    """TVN's second-pass accumulator: its own whitener on the controls unless ``fit_on`` is
    ``controls`` (then the shared whitener is TVN's); at least two control rows are needed."""
    if n_ctrl < 2:
        raise ScreenError(
            f"{source}: variant tvn is fitted on controls; {n_ctrl} row(s) have {PERT_TYPE} == {CONTROL!r}"
        )
    own = (
        None
        if options.fit_on == "controls"
        else PCAWhitener(
            options.n_components,
            options.whiten_eps,
            seeds["tvn"],
            parallel_max_samples=options.parallel_max_samples,
            ridge=options.whiten_ridge,
            max_components=control_span_cap(n_ctrl, scaler),
        )
    )
    return _TvnRows(own, n_ctrl, {})


def _shared_report(
    options: TransformOptions, d: int, n_fit: int, scaler: CenterScale | None, whitener: PCAWhitener
) -> dict[str, Any]:
    """The fit report every whitened variant starts from: the shared center-scale and whitening."""
    return {
        "n_features_in": d,
        "fit_on": options.fit_on,
        "n_samples_fit": int(n_fit),
        "center_scale": bool(options.center_scale),
        "batches": [] if scaler is None else scaler.batches_.tolist(),
        "controls_per_batch": [] if scaler is None else scaler.n_controls_.tolist(),
        "n_components_rule": whitener.component_rule(),
        "n_components": int(whitener.n_components_),
        "explained_variance_ratio": float(whitener.explained_variance_ratio_.sum()),
        "whiten_eps": float(options.whiten_eps),
        "whiten_ridge": float(options.whiten_ridge),
        "component_cap": whitener.component_cap_,
    }


def _fit_tvn(
    names: list[str],
    scaler: CenterScale | None,
    whitener: PCAWhitener,
    tvn: _TvnRows,
    options: TransformOptions,
    n_ctrl: int,
    report: dict[str, Any],
) -> VariantTransform:
    """The tvn variant: center-scale, the whitener on the controls, then per-batch CORAL."""
    tvn_whitener = whitener if tvn.whitener is None else tvn.whitener
    coral = CoralAlignment(options.tvn_coral_eps).fit_moments(whitened_moments(tvn.moments, tvn_whitener))
    report.update(
        fit_on="controls",
        n_samples_fit=int(n_ctrl),
        n_components=int(tvn_whitener.n_components_),
        n_components_rule=tvn_whitener.component_rule(),
        explained_variance_ratio=float(tvn_whitener.explained_variance_ratio_.sum()),
        coral={
            "eps": float(options.tvn_coral_eps),
            "batches": coral.batches_.tolist(),
            "controls_per_batch": coral.n_controls_.tolist(),
        },
    )
    return VariantTransform("tvn", names, scaler, tvn_whitener, None, report, coral)


def _fit_rotated(
    variant: str,
    names: list[str],
    scaler: CenterScale | None,
    whitener: PCAWhitener,
    ica_rows: RowSample | None,
    options: TransformOptions,
    seeds: Mapping[str, int],
    report: dict[str, Any],
) -> VariantTransform:
    """``pca`` (no rotation), ``pca_ica`` (ICA on the whitened ICA sample) or ``pca_rand``."""
    rotation: ICARotation | RandomRotation | None = None
    if variant == "pca_ica":
        rotation = ICARotation(
            options.ica, options.ica_max_iter, options.ica_tol, seeds["ica"], options.ica_max_samples
        )
        start = time.process_time()
        rotation.fit(whitener.transform(ica_rows.rows()))  # type: ignore[union-attr]
        report["ica"] = {
            "cpu_seconds": round(time.process_time() - start, 3),
            "method": options.ica,
            "converged": bool(rotation.converged_),
            "n_iter": int(rotation.n_iter_),
            "max_iter": int(options.ica_max_iter),
            "tol": float(options.ica_tol),
            "n_samples": int(rotation.n_samples_fit_),
            "orthogonality_error": float(rotation.orthogonality_error_),
        }
    elif variant == "pca_rand":
        rotation = RandomRotation(seeds["rand"]).draw(whitener.n_components_)
        report["rotation"] = "haar-random"
    return VariantTransform(variant, names, scaler, whitener, rotation, report)


def fit_variants_streaming(
    variants: Sequence[str],
    blocks: Callable[[], Iterable[RowBlock]],
    options: TransformOptions,
    feature_names: Sequence[str],
    source: str = "profiles",
) -> dict[str, VariantTransform]:
    """Fit several variants from row blocks, sharing one center-scale and one whitening.

    ``blocks()`` returns a fresh iterator over the rows in the same order each time (it is
    called once or twice). ``options`` holds the fit's settings (its ``variants`` are not read:
    ``variants`` are fitted). Memory holds one block, the
    (features x features) scatter and the seeded row samples, never the table:

    - pass 1: rows are checked (finite, numeric; features constant over the fit rows are an
      error naming them), the fit rows (``fit_on``: all rows, or the controls) counted, and
      each batch's control rows fed to :meth:`CenterScale.partial_fit`;
    - pass 2 (whitened variants only): rows are center-scaled and the fit rows fed to
      :meth:`PCAWhitener.partial_fit` (float64 moments, and the parallel-analysis subsample
      drawn up front from the fit-row count); a seeded subsample of at most
      ``ica_max_samples`` fit rows is collected for ICA.

    Then :meth:`PCAWhitener.finalize` whitens, ICA is fitted on the whitened ICA sample and the
    random rotation drawn. Seeds: :func:`variant_seeds` of ``options.seed``.
    """
    variants = list(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; expected some of {list(VARIANTS)}")
    names = list(feature_names)
    d = len(names)
    whitened = [v for v in variants if v in WHITENED_VARIANTS]
    center = bool(whitened) and bool(options.center_scale)
    how = _Blocks(names, source, center, options.fit_on == "controls", bool(whitened), "tvn" in whitened)
    scaler = CenterScale() if center else None
    n, n_fit, n_ctrl, lo, hi = _first_pass(blocks(), how, scaler)
    _check_fit_rows(source, options.fit_on, names, n, n_fit, lo, hi)
    fitted: dict[str, VariantTransform] = {}
    if "base" in variants:
        fitted["base"] = VariantTransform(
            "base", names, fit_report={"variant": "base", "n_features_in": d, "steps": "identity"}
        )
    if not whitened:
        return fitted
    if scaler is not None:
        scaler.finalize(names)
    seeds = variant_seeds(options.seed)
    whitener = PCAWhitener(
        options.n_components,
        options.whiten_eps,
        seeds["whiten"],
        parallel_max_samples=options.parallel_max_samples,
        ridge=options.whiten_ridge,
        max_components=control_span_cap(n_fit, scaler) if options.fit_on == "controls" else None,
    )
    ica_rows = RowSample(n_fit, options.ica_max_samples, seeds["ica_rows"]) if "pca_ica" in whitened else None
    tvn = _tvn_rows(options, seeds, n_ctrl, source, scaler) if "tvn" in whitened else None
    seen = _second_pass(blocks(), how, scaler, whitener, n_fit, ica_rows, tvn)
    if seen != n_fit:
        raise ValueError(f"{source}: the second pass saw {seen} fit rows, the first {n_fit}; the rows changed")
    whitener.finalize()
    if tvn is not None and tvn.whitener is not None:
        tvn.whitener.finalize()
    shared = _shared_report(options, d, n_fit, scaler, whitener)
    for variant in whitened:
        report = {"variant": variant, **shared}
        if variant == "tvn":
            fitted[variant] = _fit_tvn(names, scaler, whitener, tvn, options, n_ctrl, report)  # type: ignore[arg-type]
        else:
            fitted[variant] = _fit_rotated(variant, names, scaler, whitener, ica_rows, options, seeds, report)
    return fitted


# --------------------------------------------------------------------------- in memory, tables


def fit_variants(
    variants: Sequence[str],
    X: Any,
    batches: Any,
    is_control: Any,
    options: TransformOptions,
    feature_names: Sequence[str] | None = None,
) -> dict[str, VariantTransform]:
    """Fit several variants on in-memory rows (:func:`fit_variants_streaming` over row chunks
    of ``X``, ``options.batch_rows`` rows each).

    Center-scale (if ``center_scale``) is fitted on each batch's controls; whitening and ICA
    on the rows chosen by ``fit_on`` (all rows, or the controls), after center-scale.
    """
    names = list(feature_names) if feature_names is not None else [f"feature_{i}" for i in range(np.shape(X)[1])]
    X = check_matrix(X, "fit X", len(names), names)
    n = X.shape[0]
    b = None if batches is None else check_rows(batches, n, "batches")
    c = None if is_control is None else check_rows(is_control, n, "is_control")

    def blocks() -> Iterator[RowBlock]:
        for rows in row_chunks(n, options.batch_rows):
            yield X[rows], None if b is None else b[rows], None if c is None else c[rows]

    return fit_variants_streaming(variants, blocks, options, names, source="fit X")


def fit_transforms(
    profiles: Profiles,
    options: TransformOptions,
    out_dir: Path | str,
    log: logging.Logger | None = None,
) -> dict[str, Path]:
    """Fit every variant of ``options.variants`` on a profile table and save it.

    ``profiles`` is the profile parquet (read in row batches of ``options.batch_rows``, two
    passes, memory independent of its length) or an in-memory table, which goes through the
    same streaming fit (:func:`fit_variants_streaming`).

    Writes ``{out_dir}/{variant}.npz`` (+ ``.json`` sidecar) and ``{out_dir}/fit_report.json``
    (variant -> fit report). Non-finite features and features constant over the fit rows are
    errors naming the columns. Returns variant -> .npz path.
    """
    log = log or LOG
    out_dir = Path(out_dir)
    src = profile_source(profiles, options.batch_rows)
    features = source_features(src, src.label)
    needs_rows = (
        bool(options.center_scale or options.fit_on == "controls")
        and any(v in WHITENED_VARIANTS for v in options.variants)
    ) or "tvn" in options.variants
    read_rows = row_columns(src, src.label, needs_rows)

    def blocks() -> Iterator[RowBlock]:
        for batch in src.batches(features + read_rows):
            block = row_block(batch, features, bool(read_rows))
            del batch  # hold one copy of the rows, not two
            yield block

    fitted = fit_variants_streaming(options.variants, blocks, options, features, source=src.label)
    paths: dict[str, Path] = {}
    reports: dict[str, Any] = {}
    for variant, transform in fitted.items():
        paths[variant] = transform.save(out_dir / f"{variant}.npz")
        reports[variant] = transform.fit_report
        rep = transform.fit_report
        if variant == "base":
            log.info("variant base: identity on %d features", len(features))
            continue
        log.info(
            "variant %s: %d components (%s) explaining %.3f of the variance, fitted on %d rows",
            variant,
            rep["n_components"],
            rep["n_components_rule"],
            rep["explained_variance_ratio"],
            rep["n_samples_fit"],
        )
        ica = rep.get("ica")
        if ica:
            level = logging.INFO if ica["converged"] else logging.WARNING
            log.log(
                level,
                "variant %s: ICA (%s) %s after %d of %d iterations (tolerance %g) on %d rows, %.1f CPU s",
                variant,
                ica["method"],
                "converged" if ica["converged"] else "DID NOT CONVERGE",
                ica["n_iter"],
                ica["max_iter"],
                ica["tol"],
                ica["n_samples"],
                ica["cpu_seconds"],
            )
    with atomic_path(out_dir / "fit_report.json") as tmp:
        tmp.write_text(json.dumps(reports, indent=2) + "\n")
    return paths
