"""Why a (guide, fold) cannot be scored: the rules the classify jobs skip by and the door counts
by (:mod:`phenoica.classify._capacity`), declared once, and the error of a fold without controls."""

from __future__ import annotations

from phenoica.classify._options import ClassifyOptions
from phenoica.contract import ScreenError


def skip_reasons(n_train_pos: int, n_test_pos: int, options: ClassifyOptions) -> list[str]:
    """Why a (guide, fold) cannot be scored; empty when it can."""
    reasons = []
    lo_train, lo_test = options.min_train_samples, options.min_test_samples
    if n_train_pos < lo_train:
        reasons.append(f"too few training samples ({n_train_pos} < {lo_train})")
    if n_test_pos == 0:
        reasons.append("held-out fold has no samples of this guide")
    elif n_test_pos < lo_test:
        reasons.append(f"too few held-out samples ({n_test_pos} < {lo_test})")
    return reasons


def plate_control_reasons(n_train: int, n_test: int, options: ClassifyOptions) -> list[str]:
    """Why the controls on a guide's plates (``classify.control_scope: plates``: ``n_train``
    training controls there, before the fast protocol's cap and less a pseudo-guide's own wells,
    and ``n_test`` held-out negatives) cannot score it in a fold; empty when they can."""
    reasons = []
    if n_train < options.min_train_samples:
        reasons.append(f"too few training controls on its plates ({n_train} < {options.min_train_samples})")
    if n_test == 0:
        reasons.append("no held-out control on its plates")
    return reasons


def check_fold_controls(fold: str, n_train: int, n_test: int, options: ClassifyOptions, source: str) -> None:
    """A fold without enough controls to train or score any classifier is an error, with counts."""
    lo = options.min_train_samples
    if n_train < lo or n_test < 1:
        raise ScreenError(
            f"{source}: fold {fold!r} has {n_train} training control sample(s) and {n_test} held-out control "
            f"sample(s); every guide needs at least classify.min_train_samples = {lo} training controls and one "
            "held-out control. Each batch must hold control wells"
        )
