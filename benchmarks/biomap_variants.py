"""Batch removed vs biology kept for every variant, tvn included, on a finished run's profiles.

The workflow scores tvn only when ``transforms.variants`` lists it (which reruns every
classifier). This script answers the gene-map half of the question without a rerun: it fits
``--variants`` (default: base, pca, pca_ica, pca_rand, tvn) on ``{results}/profiles/{model}.parquet``
with the run's ``transforms`` settings, applies them, and computes on each one, as the
workflow does, the batch metrics (well profiles, controls and all) and the gene map of ALL
perturbed genes (no hit calls are needed) with the recall of the annotation sources and, on
the demo, of the simulated complexes. Printed: one row per variant and the difference of
each score from the ``base`` variant measured in the same run.

    python benchmarks/biomap_variants.py --results results --model mae
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from phenoica.biomap import (
    TRUTH_SOURCE,
    BatchMetricsOptions,
    GeneMapOptions,
    MapInputs,
    ProfileOptions,
    aggregate_profiles,
    batch_metrics,
    gene_map,
)
from phenoica.classify import well_profiles
from phenoica.contract import validate_config
from phenoica.screen import load_sources
from phenoica.transforms import TransformOptions, apply_transform, fit_transforms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--model", default="mae")
    parser.add_argument("--variants", default="base,pca,pca_ica,pca_rand,tvn")
    parser.add_argument("--csv", type=Path, help="also write the table here")
    args = parser.parse_args()
    config = validate_config(yaml.safe_load(args.config.read_text()))
    map_options = GeneMapOptions.from_config(config)._replace(genes="all")
    batch_options = BatchMetricsOptions.from_config(config)
    center = ProfileOptions.from_config(config).center_on_controls
    sources = load_sources(map_options.annotation_sources())
    truth_path = args.results / "screen" / "truth.parquet"
    truth = pd.read_parquet(truth_path) if truth_path.exists() else None
    profiles = pd.read_parquet(args.results / "profiles" / f"{args.model}.parquet")
    variants = args.variants.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = fit_transforms(profiles, TransformOptions.from_config(config)._replace(variants=variants), tmp)
        for variant in variants:
            table = apply_transform(profiles, paths[variant])
            batch = batch_metrics(well_profiles(table), batch_options, model=args.model, variant=variant)
            guides, genes = aggregate_profiles(table, center)
            inputs = MapInputs(guides, genes, None, sources, truth)
            tables, *_ = gene_map(inputs, map_options, model=args.model, variant=variant)
            row = {"variant": variant}
            for r in batch.itertuples():
                row[f"batch_removal_{r.subset}"] = r.batch_removal
                row[f"batch_accuracy_{r.subset}"] = r.batch_accuracy
                row[f"asw_batch_{r.subset}"] = r.asw_batch
                row[f"ilisi_norm_{r.subset}"] = r.ilisi_norm
            for r in tables["recall"].itertuples():
                row[f"recall_{r.source}_{r.lower:g}"] = r.recall
            cons = tables["consistency"]
            row["genes_consistent_p05"] = int((cons["p_value"] < 0.05).sum())
            rows.append(row)
    out = pd.DataFrame(rows).set_index("variant")
    pd.set_option("display.width", 200)
    print(
        f"model {args.model}, {len(genes[genes['Metadata_PertType'] == 'perturbation'])} genes (all), "
        f"recall sources {sorted(set(sources) | ({TRUTH_SOURCE} if truth is not None else set()))}"
    )
    print(out.T.round(3).to_string())
    if "base" in out.index:
        print("\ndifference from base (same run):")
        print((out - out.loc["base"]).drop(index="base").T.round(3).to_string())
    if args.csv:
        out.to_csv(args.csv)


if __name__ == "__main__":
    main()
