"""Every file the workflow writes, one declaration each: an output template per stage, below the
results folder, in the wildcards of the rule that writes it (``{plate}``, ``{model}``,
``{variant}``, ``{shard}``, ``{point}``, ``{kind}``; the studies' ``{dataset}``, ``{group}``,
``{alpha}``, ``{dis_dataset}``, ``{dis_model}``, ``{dis_seed}``). A study's page, Markdown and
verdict (``{study}``) lie in its folder, named once for all studies.

The rules take their outputs and the inputs they read from other stages from this table
(``PATHS``, built in ``rules/common.smk``; ``expand(PATHS.classify.shard, ...)`` for
lists), the library finds the same files through it (e.g. :func:`phenoica.workflow._dag.training_record`),
and the logs and benchmark files of every rule follow one pattern (:func:`log_path`,
:func:`benchmark_path`). A path changed here changes everywhere it is used.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Mapping

#: The studies' folders (``studies/{study}``), below which each study writes its own files.
_BILIPSCHITZ = "studies/bilipschitz"
_DISENTANGLE = "studies/disentangle"
_DISENTANGLE_RUN = f"{_DISENTANGLE}/{{dis_dataset}}/{{dis_model}}/seed{{dis_seed}}"

#: stage -> output name -> template below the results folder
OUTPUTS: Mapping[str, Mapping[str, str]] = {
    "screen": {
        "truth": "screen/truth.parquet",
        "store": "screen/plates/{plate}.zarr",
        "metadata": "screen/metadata/{plate}.parquet",
        "factors": "screen/factors/{plate}.parquet",
        "validated": "screen/validated.json",
    },
    "embed": {
        "checkpoint": "embed/{model}/encoder.safetensors",
        "training": "embed/{model}/training.json",
        "embedding": "embed/{model}/{plate}.parquet",
    },
    "profiles": {
        "table": "profiles/{model}.parquet",
        "hygiene": "profiles/{model}.hygiene.json",
    },
    "transforms": {
        "transform": "transforms/{model}/{variant}.npz",
        "fit_report": "transforms/{model}/fit_report.json",
        "variant": "transforms/{model}/{variant}.parquet",
    },
    "splits": {
        "folds": "splits/{model}.parquet",
    },
    "sweep": {
        "point": "sweep/{model}/{variant}/point_{point}.parquet",
        "table": "sweep/{model}.parquet",
    },
    "classify": {
        "shard": "classify/{model}/{variant}/shard_{shard}.parquet",
        "map": "classify/{model}/{variant}/map.parquet",
        "retrieval": "classify/{model}/{variant}/retrieval.parquet",
        "guide_folds": "classify/guide_folds.parquet",
        "controls": "classify/controls.parquet",
        "maps": "classify/map.parquet",
        "retrievals": "classify/retrieval.parquet",
    },
    "hits": {
        "guides": "hits/guides.parquet",
        "genes": "hits/genes.parquet",
        "hits": "hits/hits.parquet",
        "null": "hits/null.parquet",
        "controls": "hits/controls.parquet",
        "plate_wells": "hits/plate_wells.parquet",
        "positions": "hits/positions.parquet",
        "null_layout": "hits/null_layout.parquet",
        "reference": "hits/reference.parquet",
    },
    "identifiability": {
        "align": "identifiability/align/{variant}.parquet",
        "structural": "identifiability/structural/{model}/{variant}.parquet",
        "table1": "identifiability/table1.parquet",
        "structural_table": "identifiability/structural.parquet",
    },
    "biomap": {
        "guide_profiles": "biomap/{model}/{variant}/guide_profiles.parquet",
        "gene_profiles": "biomap/{model}/{variant}/gene_profiles.parquet",
        "table": "biomap/{model}/{variant}/{kind}.parquet",
        "heatmap": "biomap/{model}/{variant}/heatmap.png",
        "batch_metrics": "biomap/{model}/{variant}/batch_metrics.parquet",
        "gathered": "biomap/{kind}.parquet",
    },
    "report": {
        "markdown": "report/report.md",
        "html": "report/index.html",
        "figures": "report/figures",
        "plates": "report/plates",
        "tables": "report/tables",
        "gallery": "report/gallery",
        "interactive": "report/interactive.html",
        "interactive_assets": "report/interactive_assets",
    },
    "studies": {
        "markdown": "studies/{study}/report.md",
        "html": "studies/{study}/index.html",
        "verdict": "studies/{study}/verdict.json",
        "bilipschitz": _BILIPSCHITZ,
        "bilipschitz_run": f"{_BILIPSCHITZ}/runs/{{dataset}}/{{group}}/alpha{{alpha}}.parquet",
        "bilipschitz_models": f"{_BILIPSCHITZ}/{{dataset}}/models.parquet",
        "bilipschitz_pairs": f"{_BILIPSCHITZ}/{{dataset}}/pairs.parquet",
        "bilipschitz_samples": f"{_BILIPSCHITZ}/{{dataset}}/samples.parquet",
        "disentangle": _DISENTANGLE,
        "disentangle_latents": f"{_DISENTANGLE_RUN}/latents.npz",
        "disentangle_checkpoint": f"{_DISENTANGLE_RUN}/model.safetensors",
        "disentangle_scores": f"{_DISENTANGLE_RUN}/scores.parquet",
        "disentangle_table2": f"{_DISENTANGLE}/table2.csv",
        "disentangle_differences": f"{_DISENTANGLE}/differences.csv",
        "disentangle_score_table": f"{_DISENTANGLE}/scores.csv",
    },
}


def output_paths(results: str) -> SimpleNamespace:
    """The table with the results folder in front: ``output_paths("results").embed.embedding``
    is ``"results/embed/{model}/{plate}.parquet"``."""
    return SimpleNamespace(
        **{
            stage: SimpleNamespace(**{name: f"{results}/{template}" for name, template in outputs.items()})
            for stage, outputs in OUTPUTS.items()
        }
    )


def log_path(results: str, rule: str, wildcards: str = "") -> str:
    """The log of one job of ``rule``: ``{results}/logs/{rule}/{wildcards}.log`` (a rule with one
    job: ``{results}/logs/{rule}.log``)."""
    return f"{results}/logs/{rule}/{wildcards}.log" if wildcards else f"{results}/logs/{rule}.log"


def benchmark_path(results: str, rule: str, wildcards: str = "") -> str:
    """The benchmark file of one job of ``rule``, laid out like its log (:func:`log_path`)."""
    return f"{results}/benchmarks/{rule}/{wildcards}.tsv" if wildcards else f"{results}/benchmarks/{rule}.tsv"
