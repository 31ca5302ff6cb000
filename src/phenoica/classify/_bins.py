"""Shared binning of one fold: bin boundaries found once on the training controls
(:class:`FoldBins`), and the binned training rows of a block of guides (:class:`GuideBlock`).

The controls dominate every training set (tens of thousands of rows against a guide's handful),
so everything about them is done once per fold or block, not per guide:

1. bin boundaries are found once per fold and feature, on the fold's training controls
   (``FoldBins``); a guide's score therefore does not depend on which other guides share its
   table or shard;
2. the training controls and the training rows of a block of guides (``GUIDES_PER_BLOCK``) are
   binned once (``GuideBlock``), one LightGBM Dataset per feature column, and merged into one
   all-feature Dataset;
3. a guide's training set is a row subset of that (``Dataset.subset``: a copy of binned rows,
   no re-binning); the concentration models' column subsets are merged from the per-feature
   Datasets (``Dataset.add_features_from``: a copy of binned columns) and then row-subset.

A feature constant across a fold's training controls gets a single bin and is never split on
in that fold (bins come from the controls); for continuous embeddings this does not occur. Bins
are found on all training controls, a pseudo-guide's own wells included (a few wells of the
fold's control set).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import lightgbm as lgb
import numpy as np

GUIDES_PER_BLOCK = 64
#: Columns joined one by one before the runs are joined (:meth:`GuideBlock.merge`).
MERGE_RUN = 16


@dataclass
class FoldBins:
    """What every guide of one fold (training set) shares: bin boundaries and training controls.

    ``bins[j]`` is a constructed one-feature ``lightgbm.Dataset`` of the fold's training
    controls: it fixes feature ``j``'s bin boundaries for every guide of the fold. ``weight``
    (None: unweighted) is the weight of every training row of the fold's blocks (the fast
    protocol's sampled controls stand for all of them: :class:`phenoica.classify._protocol.ControlSample`);
    the bins are found on the rows unweighted.
    """

    bins: list[lgb.Dataset]
    X: np.ndarray
    train_controls: np.ndarray
    params: dict[str, Any]
    weight: float | None = None

    @classmethod
    def build(
        cls, X: np.ndarray, train_controls: np.ndarray, params: Mapping[str, Any], weight: float | None = None
    ) -> "FoldBins":
        """Find each feature's bin boundaries on ``X[train_controls]``."""
        params = dict(params)
        bins = [
            lgb.Dataset(X[train_controls, j : j + 1], feature_name=[f"f{j:04d}"], params=params).construct()
            for j in range(X.shape[1])
        ]
        return cls(bins, X, np.asarray(train_controls, dtype=np.int64), params, weight)

    def block(self, train_guide_rows: np.ndarray) -> "GuideBlock":
        """Bin the training controls plus ``train_guide_rows`` (a block of guides) once.

        ``train_guide_rows`` may hold control rows (pseudo-guides): they are binned a second
        time with label 1, beside their label-0 copy among the controls.
        """
        guide_rows = np.asarray(train_guide_rows, dtype=np.int64)
        rows = np.concatenate([self.train_controls, guide_rows])
        label = np.concatenate([np.zeros(len(self.train_controls)), np.ones(len(guide_rows))])
        weight = None if self.weight is None else np.full(len(rows), self.weight)
        columns = [
            lgb.Dataset(
                self.X[rows, j : j + 1],
                label=label,
                weight=weight,
                reference=ref,
                feature_name=ref.feature_name,
                params=self.params,
            ).construct()
            for j, ref in enumerate(self.bins)
        ]
        n_ctrl = len(self.train_controls)
        control_local = np.full(len(self.X), -1, dtype=np.int64)
        control_local[self.train_controls] = np.arange(n_ctrl)
        guide_local = np.full(len(self.X), -1, dtype=np.int64)
        guide_local[guide_rows] = n_ctrl + np.arange(len(guide_rows))
        block = GuideBlock(columns, columns[0], n_ctrl, control_local, guide_local)
        block.dataset = block.merge(range(len(columns)))
        return block


@dataclass
class GuideBlock:
    """Binned training rows of one fold for a block of guides.

    ``columns[j]`` is feature ``j`` as a one-feature Dataset over the fold's training controls
    (first ``n_controls`` rows, label 0) and the block's guides' training rows (label 1),
    binned with the fold's ``FoldBins``; ``dataset`` is all features merged. ``control_local``
    and ``guide_local`` map a table row to its label-0 and label-1 row in them (-1 when
    absent). Blocks keep the per-guide copying proportional to the controls, however many
    guides a shard holds.
    """

    columns: list[lgb.Dataset]
    dataset: lgb.Dataset
    n_controls: int
    control_local: np.ndarray
    guide_local: np.ndarray

    def merge(self, features: Iterable[int]) -> lgb.Dataset:
        """The given feature columns, in order, as one Dataset over all block rows (bins copied,
        not redone).

        ``add_features_from`` reads both sides' feature names, so adding columns one at a time
        to one growing Dataset costs the square of their number: columns are joined in runs of
        :data:`MERGE_RUN`, then the runs (half the cost at 150 columns, the same at 30). The
        columns' order, and so the Dataset, is the same either way.
        """
        features = [int(f) for f in features]
        with warnings.catch_warnings():
            # LightGBM warns that raw data was freed and categorical features reset: both intended
            warnings.simplefilter("ignore", UserWarning)
            runs = [self._joined(features[i : i + MERGE_RUN]) for i in range(0, len(features), MERGE_RUN)]
            for run in runs[1:]:
                runs[0].add_features_from(run)
        return runs[0]

    def _joined(self, features: list[int]) -> lgb.Dataset:
        """A copy of the first column with the others added to it, in order."""
        joined = self.columns[features[0]].subset(list(range(self.columns[0].num_data()))).construct()
        for f in features[1:]:
            joined.add_features_from(self.columns[f])
        return joined

    def guide_dataset(self, train_positions: np.ndarray, features: np.ndarray | None = None) -> lgb.Dataset:
        """The training set of one guide: the training controls except its own rows (which only
        a pseudo-guide has among them) + its rows as positives, already binned.

        ``features`` (sorted column indices) restricts it to those columns; None = all.
        """
        loc = self.guide_local[train_positions]
        if (loc < 0).any():
            raise ValueError("GuideBlock.guide_dataset: some rows were not binned in this block")
        keep = np.ones(self.n_controls, dtype=bool)
        own = self.control_local[train_positions]
        keep[own[own >= 0]] = False
        source = self.dataset if features is None else self.merge(features)
        return source.subset(np.concatenate([np.flatnonzero(keep), np.sort(loc)]).astype(np.int32))
