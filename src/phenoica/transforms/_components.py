"""How many whitened components to keep: the rules of ``transforms.n_components``.

A rule turns the covariance of the (center-scaled) fit rows into a count. Four exist:

- an integer: that many components (at most the data's numerical rank: more is an error);
- a fraction in (0, 1): the fewest leading components whose eigenvalues reach that share of
  the total variance;
- ``"parallel"``: Horn's parallel analysis (:func:`phenoica.transforms.parallel_analysis`): keep
  the leading eigenvalues above the 95th percentile of the eigenvalues of column-wise permuted
  data. The permuted data keep every column's full variance, so when a few large nuisance
  directions (cell-to-cell variation unrelated to guides) hold most of the variance the floor
  rises with them and the smaller biological directions fall under it ("shadowing");
- ``"deflated"`` (the default): deflated deterministic parallel analysis (Dobriban and Owen,
  "Deterministic parallel analysis: an improved method for selecting factors and principal
  components", JRSS-B 2019). The noise model is the same as parallel analysis's: every feature
  carries independent noise of its own variance. Instead of permuting, the largest eigenvalue
  such noise would show (the upper edge of the Marchenko-Pastur law whose population variances
  are the columns' variances, at the data's aspect ratio features / rows) is computed, and
  components already kept are removed from the column variances before the next one is
  tested: component ``k + 1`` is kept while its eigenvalue exceeds the edge of the residual's
  column variances after the first ``k``. Large nuisance directions are kept (they are real
  structure, and the whitening scales them down to unit variance) and no longer hide the small
  ones. Deterministic, computed from the covariance alone (no row sample, no seed).

Every rule must keep at least 2 components (ICA of one axis is no rotation): a count below 2 is
refused where the value is read (:func:`phenoica.contract.component_rule`, the one check of
the value), and a rule that keeps fewer on the data is an error that names the rule and the
leading eigenvalues beside their thresholds (:func:`too_few`).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from phenoica.contract import MIN_COMPONENTS


def noise_edge(variances: np.ndarray, aspect: float) -> float:
    """Upper edge of the spectrum of the sample covariance of independent noise whose features
    have population ``variances``, at aspect ratio ``aspect`` = features / rows (the
    generalized Marchenko-Pastur law; Silverstein and Choi 1995).

    The edge is ``min over v in (-1/max t, 0) of -1/v + aspect * mean_j t_j / (1 + t_j v)``
    (a convex function on that interval); with equal variances ``s`` it is ``s (1 + sqrt(aspect))^2``.
    """
    t = np.asarray(variances, dtype=np.float64)
    t = t[t > 0]
    if t.size == 0:
        return 0.0
    top = float(t.max())

    def z(s: float) -> float:  # v = -s / top, s in (0, 1)
        v = -s / top
        return -1.0 / v + aspect * float(np.mean(t / (1.0 + t * v)))

    res = optimize.minimize_scalar(z, bounds=(1e-12, 1.0 - 1e-12), method="bounded", options={"xatol": 1e-10})
    return float(res.fun)


def deflated_count(
    eigenvalues: np.ndarray, eigenvectors: np.ndarray, column_variances: np.ndarray, n_samples: int
) -> tuple[int, np.ndarray]:
    """Deflated deterministic parallel analysis: (components kept, threshold of each tested rank).

    ``eigenvalues`` descending with their ``eigenvectors`` (columns) of the covariance whose
    diagonal is ``column_variances``; ``n_samples`` rows made it. Rank ``k`` (0-based) is kept
    while ``eigenvalues[k]`` exceeds :func:`noise_edge` of the column variances left after
    removing the ``k`` components before it; the thresholds of the ranks tested are returned
    (the last one is the first rank that failed, unless every rank passed).

    Removing a component takes out its signal, not its whole eigenvalue: the noise along its
    direction ``v`` (``sum_j v_j^2 r_j`` for residual column variances ``r``) stays, so that
    noise directions never pass because earlier steps removed the noise with the signal
    (Dobriban and Owen subtract the estimated signal for the same reason).
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    V = np.asarray(eigenvectors, dtype=np.float64)
    residual = np.asarray(column_variances, dtype=np.float64).copy()
    d = lam.size
    aspect = d / max(int(n_samples) - 1, 1)
    thresholds = []
    for k in range(d):
        edge = noise_edge(np.clip(residual, 0.0, None), aspect)
        thresholds.append(edge)
        if not lam[k] > edge:
            return k, np.asarray(thresholds)
        v2 = V[:, k] ** 2
        signal = max(float(lam[k] - v2 @ residual), 0.0)  # the eigenvalue less the noise along it
        residual -= signal * v2
    return d, np.asarray(thresholds)


def too_few(rule: str, k: int, eigenvalues: np.ndarray, thresholds: np.ndarray | None) -> ValueError:
    """The error of a rule that keeps fewer than :data:`MIN_COMPONENTS` components, naming the
    rule and the leading eigenvalues (beside their thresholds, where the rule has them)."""
    lead = ", ".join(f"{v:.4g}" for v in np.asarray(eigenvalues)[:5])
    floor = "" if thresholds is None else f" against thresholds [{', '.join(f'{v:.4g}' for v in thresholds[:5])}]"
    return ValueError(
        f"n_components rule {rule!r} keeps {k} component(s) (at least {MIN_COMPONENTS} are needed): leading "
        f"eigenvalues [{lead}]{floor}. The data show at most one direction above the noise floor; check the "
        "embeddings, or set transforms.n_components to a count"
    )
