"""Scoring a finished run of a known-truth screen (the positive control or the cell-state screen
that :mod:`phenoica.screen.known_truth` writes) against its truth: how well effect genes
separate from the rest, the variants' contrasts with intervals, Table 4, recall and FDR of the hit
calls, and how well each variant's features match the true biological sources (MCC).

``python -m phenoica.report.known_truth_section --results RESULTS --data DATA`` prints the tables.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from phenoica.contract import OUTPUTS, PLATE, SITE, WELL, feature_columns
from phenoica.hits import recall_fdr
from phenoica.report import _checks as checks
from phenoica.report import _summaries as summaries
from phenoica.report import _truth_stats as truth
from phenoica.report._truth_stats import source_mcc


def variant_mcc(results: Path | str, data: Path | str, model: str, variants: list[str]) -> pd.DataFrame:
    """Per variant: the MCC (:func:`phenoica.report._truth_stats.source_mcc`) between its features (the
    ``transforms/{model}/{variant}.parquet`` rows of a finished run) and the true biological
    sources of ``sources.parquet``, cells matched by plate, well and site; ``n_features`` is D."""
    sources = pd.read_parquet(Path(data) / "sources.parquet")
    bio = [c for c in sources.columns if str(c).startswith("factor_")]
    keys = [PLATE, WELL, SITE]
    rows = []
    for variant in variants:
        table = pd.read_parquet(Path(results) / OUTPUTS["transforms"]["variant"].format(model=model, variant=variant))
        table = table.astype({PLATE: str, WELL: str}).merge(sources, on=keys, how="inner", validate="one_to_one")
        if len(table) != len(sources):
            raise ValueError(f"{variant}: {len(table)} of {len(sources)} cells matched the sources by {keys}")
        features = [c for c in feature_columns(table) if c not in sources.columns]
        mcc, matched = source_mcc(table[features].to_numpy(), table[bio].to_numpy())
        rows.append(
            {"model": model, "variant": variant, "n_features": len(features), "mcc": mcc, "mcc_min": matched.min()}
        )
    return pd.DataFrame(rows)


def evaluate(
    results: Path | str, data: Path | str, model: str = "ext", q_threshold: float = 0.1, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """Score a finished run of a known-truth screen (``results``: its results folder; ``data``:
    the folder :func:`phenoica.screen.write_known_truth_screen` wrote). Tables: ``separation`` (effect vs no-effect AUROC),
    ``contrasts`` (variant contrasts of :func:`phenoica.report._truth_stats.variant_contrasts`), ``auroc`` and
    ``concentration`` (paired over effect genes), ``table4``, ``recall`` (guide and gene level at
    ``q_threshold``), ``mcc``. Intervals: bootstrap over genes (seeded by ``seed``)."""
    results, data = Path(results), Path(data)
    guides = pd.read_parquet(results / OUTPUTS["hits"]["guides"])
    folds = pd.read_parquet(results / OUTPUTS["classify"]["guide_folds"])
    known = pd.read_parquet(data / "truth.parquet")
    guides = guides[guides["model"] == model]
    variants = checks.ordered_variants(guides["variant"].unique())
    return {
        "separation": truth.effect_separation(guides, known, seed=seed),
        "contrasts": truth.variant_contrasts(guides, known, seed=seed),
        "auroc": truth.paired_effect_contrast(guides, known, "auroc", seed=seed),
        "concentration": truth.paired_effect_contrast(guides, known, "concentration", seed=seed),
        "table4": summaries.table4(folds[folds["model"] == model]),
        "recall": recall_fdr(guides, known, (q_threshold,)),
        "mcc": variant_mcc(results, data, model, variants),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the scores of a finished run of a known-truth screen."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, help="the run's results folder")
    parser.add_argument("--data", required=True, help="the folder `python -m phenoica.screen.known_truth` wrote")
    parser.add_argument("--model", default="ext")
    parser.add_argument("--q", type=float, default=0.1)
    args = parser.parse_args(argv)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        for name, table in evaluate(args.results, args.data, args.model, args.q).items():
            print(f"== {name}\n{table.to_string(index=False)}\n")


if __name__ == "__main__":
    main()
