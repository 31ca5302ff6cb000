"""Well level: per-well means of image-level profiles, streamed (:class:`WellMeans`) or in
memory (:func:`aggregate_wells`); metadata constant within a well is kept."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import sparse

from phenoica.contract import PLATE, WELL, ScreenError, feature_columns, metadata_columns
from phenoica.utils import row_chunks

#: The per-well image count a well-level table carries.
N_IMAGES = "Metadata_NImages"


def constant_within_wells(meta: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """Those of ``columns`` whose value never changes within a (plate, well) of ``meta``."""
    if meta.empty:
        return list(columns)
    nunique = meta.groupby([PLATE, WELL], sort=False, observed=True)[list(columns)].nunique(dropna=False)
    return [c for c in columns if (nunique[c] <= 1).all()]


class WellMeans:
    """Running per-well feature sums (float64) over the row batches of one plate's file.

    ``update(meta, X)`` adds rows (``meta``: an arrow batch with the plate, well and kept
    metadata columns); ``result()`` returns the wells sorted by (plate, well): their first
    row's metadata, the image count and the float32 mean features.
    """

    def __init__(self, kept: Sequence[str], n_features: int) -> None:
        self.kept = [PLATE, WELL, *[c for c in kept if c not in (PLATE, WELL)]]
        self.ids: dict[tuple, int] = {}
        self.first: list[pa.Table] = []
        self.sums = np.zeros((0, n_features))
        self.counts = np.zeros(0, dtype=np.int64)

    def update(self, meta: pa.RecordBatch | pa.Table, X: np.ndarray) -> None:
        """Add the rows of ``meta`` with features ``X``."""
        keys = pd.DataFrame({PLATE: meta.column(PLATE).to_pandas(), WELL: meta.column(WELL).to_pandas()})
        local = keys.groupby([PLATE, WELL], sort=False, dropna=False).ngroup().to_numpy()
        firsts = np.unique(local, return_index=True)[1]
        ids = np.empty(firsts.size, dtype=np.int64)
        new = []
        for g, row in enumerate(firsts):
            key = (keys[PLATE].iat[row], keys[WELL].iat[row])
            if key not in self.ids:
                self.ids[key] = len(self.ids)
                new.append(row)
            ids[g] = self.ids[key]
        if new:
            table = meta if isinstance(meta, pa.Table) else pa.Table.from_batches([meta])
            self.first.append(table.select(self.kept).take(pa.array(new)))
            grow = len(self.ids) - self.counts.size
            self.sums = np.vstack([self.sums, np.zeros((grow, self.sums.shape[1]))])
            self.counts = np.concatenate([self.counts, np.zeros(grow, dtype=np.int64)])
        self.counts[ids] += np.bincount(local, minlength=firsts.size)
        for rows in row_chunks(len(local)):
            part = local[rows]
            indicator = sparse.csr_matrix(
                (np.ones(part.size), (part, np.arange(part.size))), shape=(firsts.size, part.size)
            )
            self.sums[ids] += indicator @ np.asarray(X[rows], dtype=np.float64)

    def result(self) -> tuple[pa.Table, np.ndarray]:
        """(metadata of every well + ``Metadata_NImages``, float32 mean features), sorted by (plate, well)."""
        if not self.first:
            raise ScreenError("well-level aggregation: no rows")
        meta = pa.concat_tables(self.first)
        meta = meta.append_column(N_IMAGES, pa.array(self.counts))
        means = (self.sums / self.counts[:, None]).astype(np.float32)
        keys = pd.DataFrame({"p": meta.column(PLATE).to_pandas(), "w": meta.column(WELL).to_pandas()})
        order = keys.sort_values(["p", "w"], kind="stable").index.to_numpy()
        return meta.take(pa.array(order)), means[order]


def aggregate_wells(df: pd.DataFrame) -> pd.DataFrame:
    """Mean profile per (plate, well); metadata constant within a well is kept, the rest dropped."""
    if WELL not in df.columns:
        raise ScreenError(f"well-level analysis needs the {WELL} column")
    meta = metadata_columns(df)
    features = feature_columns(df)
    kept = constant_within_wells(df, [c for c in meta if c not in (PLATE, WELL)])
    table = pa.Table.from_pandas(df[[PLATE, WELL, *kept]], preserve_index=False)
    wells = WellMeans(kept, len(features))
    wells.update(table, df[features].to_numpy())
    out_meta, means = wells.result()
    out = out_meta.to_pandas()
    values = pd.DataFrame(means, columns=features, index=out.index)
    return pd.concat([out, values], axis=1)
