"""Rows whose features are all zero or all equal: legal input, but not a measurement.

A row whose every feature is 0 is what failed segmentation or an export's missing-value fill
(``fillna(0)``) looks like; a row whose features are all one value is a constant image or a
fill of another value. Such rows pass every check of the contract (finite, numeric), yet after
centring on the controls they sit far from every real profile, and a gene whose rows are all
like that separates from the controls perfectly: it is called a hit. They are not dropped
(phenoica guesses nothing); they are noted, with counts, first rows and genes
(:class:`ConstantRows`), at the door for embeddings from elsewhere and in the
``gather_profiles`` log for every source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from phenoica.contract import GENE
from phenoica.profiles._columns import FeatureSelection
from phenoica.profiles._embeddings import plan_files, read_blocks
from phenoica.profiles._tables import Rows, row_at
from phenoica.screen import ExportSpec

#: Rows and genes named per note.
EXAMPLES = 5
ZERO, EQUAL = "every feature 0", "every feature one value (not 0)"


@dataclass
class ConstantRows:
    """Running counts, as row blocks stream by, of rows whose features are all 0 (:data:`ZERO`)
    or all one other value (:data:`EQUAL`): in all, per gene, and the first rows of each kind."""

    rows: int = 0
    per_gene: dict[str, int] = field(default_factory=dict)
    found: dict[str, dict[str, int]] = field(default_factory=lambda: {ZERO: {}, EQUAL: {}})
    examples: dict[str, list[str]] = field(default_factory=lambda: {ZERO: [], EQUAL: []})

    def update(self, X: np.ndarray, genes: Sequence[str], source: str, start: Rows = 0) -> None:
        """Count the rows of feature block ``X`` (rows x features) with their ``genes``; rows
        are named ``{source} row {n}``, ``n`` the file's number of the row (:data:`Rows`)."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] == 0 or len(X) == 0:
            return
        genes = np.asarray([str(g) for g in genes])
        self.rows += len(X)
        for g, n in zip(*np.unique(genes, return_counts=True)):
            self.per_gene[str(g)] = self.per_gene.get(str(g), 0) + int(n)
        lo, hi = X.min(axis=1), X.max(axis=1)
        zero = (lo == 0) & (hi == 0)
        for kind, mask in ((ZERO, zero), (EQUAL, (lo == hi) & ~zero)):
            if not mask.any():
                continue
            for g, n in zip(*np.unique(genes[mask], return_counts=True)):
                self.found[kind][str(g)] = self.found[kind].get(str(g), 0) + int(n)
            room = EXAMPLES - len(self.examples[kind])
            self.examples[kind] += [f"{source} row {row_at(start, i)}" for i in np.flatnonzero(mask)[:room]]

    def notes(self) -> list[str]:
        """One note per kind found: how many rows of how many, the first rows, and the genes
        with the most such rows (each with its count of its rows: ``of n``)."""
        out = []
        for kind, genes in self.found.items():
            if not genes:
                continue
            n = sum(genes.values())
            ranked = sorted(genes.items(), key=lambda gn: (-gn[1], gn[0]))
            shown = ", ".join(f"{g!r} {k} of {self.per_gene[g]}" for g, k in ranked[:EXAMPLES])
            more = f" and {len(ranked) - EXAMPLES} more gene(s)" if len(ranked) > EXAMPLES else ""
            out.append(
                f"{n} of {self.rows} row(s) have {kind} (failed segmentation, or a missing-value fill?): "
                f"e.g. {', '.join(self.examples[kind])}; per gene: {shown}{more}. They are analysed as data: a gene "
                "whose rows are all like this can separate from the controls and be called a hit"
            )
        return out


def constant_row_notes(
    paths: Sequence[str],
    embedding_column: str | None = None,
    selection: FeatureSelection | None = None,
    batch_rows: int = 65_536,
    spec: ExportSpec = ExportSpec(),
) -> list[str]:
    """:meth:`ConstantRows.notes` of a set of embedding files, read block by block (the
    features :func:`phenoica.profiles.plan_files` chooses, exports read through ``spec``)."""
    plan = plan_files(paths, embedding_column, selection, spec)
    counts = ConstantRows()
    for file in plan.files:
        for block in read_blocks(file, plan, batch_rows, None, None):
            genes = (
                block.batch.column(GENE).to_pylist() if GENE in block.batch.schema.names else [""] * len(block.features)
            )
            counts.update(block.features, genes, file.path, block.start)
    return counts.notes()
