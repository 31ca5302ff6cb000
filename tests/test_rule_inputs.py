"""What the rules read, decided by the library when the DAG is built (phenoica.workflow._rule_inputs,
phenoica.workflow._rule_resources): known answers on validated configs, no Snakemake run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from phenoica.contract import ScreenError, run_models, validate_config
from phenoica.workflow import RuleInputs, embed_rules, rule_resources, rule_threads

PLATES = {"P1": "B1", "P2": "B1", "P3": "B2"}


def inputs(**sections) -> RuleInputs:
    return RuleInputs(validate_config(run_models(sections)), PLATES)


def test_demo_inputs_are_the_workflows_own_files():
    run = inputs(results="res")
    assert run.store("P2") == "res/screen/plates/P2.zarr"
    assert run.truth() == ["res/screen/truth.parquet"]
    assert run.checkpoint(run.models[0]) == f"res/embed/{run.models[0]}/encoder.safetensors"
    assert run.embeddings("m") == [f"res/embed/m/{p}.parquet" for p in PLATES]
    # product order: models (by name) outer, variants inner, as Snakemake's expand
    assert run.maps() == [f"res/classify/{m}/{v}/map.parquet" for m in run.models for v in run.variants]
    assert run.maps(["pca", "pca_ica"]) == [
        "res/classify/{model}/pca/map.parquet",
        "res/classify/{model}/pca_ica/map.parquet",
    ]
    assert len(run.structurals()) == len(run.models) * len(run.variants)


def test_user_files_replace_the_workflows_where_the_config_names_them(tmp_path):
    run = inputs(
        results="res",
        screen={"source": "zarr", "plates_dir": "stores", "metadata": "meta.parquet"},
        models={"m": {"checkpoint": "w.safetensors"}},
        transforms={"frozen": "old/transforms"},
    )
    assert run.store("P1") == "stores/P1.zarr"
    assert run.checkpoint("m") == "w.safetensors"
    assert run.transform("m", "pca") == "old/transforms/m/pca.npz"
    assert run.fit_report("m") == "old/transforms/m/fit_report.json"
    assert run.truth() == [] and run.structurals() == []  # no simulated truth outside the demo
    assert run.sweeps() == []  # frozen transforms are not refitted, so not swept
    assert run.aligns() == []  # one model: nothing to align


def test_a_models_variants_are_one_job_unless_the_transforms_are_frozen():
    """Fitted here, one job per model does every variant (one fit_transforms job rewrites all of
    a model's variant files); with frozen transforms one job per (model, variant), unless asked
    per model (the gene map, which reads the whole screen's calls)."""
    fitted = inputs(results="res")
    assert fitted.variant_job == "{model}"
    assert fitted.variant_files("res/t/{model}/{variant}.parquet") == [
        f"res/t/{{model}}/{v}.parquet" for v in fitted.variants
    ]
    job = SimpleNamespace(model="m")
    assert fitted.job_variants(job) == fitted.variants
    assert fitted.job_transforms(job) == [f"res/transforms/m/{v}.npz" for v in fitted.variants]
    frozen = inputs(results="res", transforms={"frozen": "old"})
    assert frozen.variant_job == "{model}/{variant}"
    assert frozen.variant_files("res/t/{model}/{variant}.parquet") == ["res/t/{model}/{variant}.parquet"]
    assert frozen.variant_files("res/t/{model}/{variant}.parquet", per_model=True) == fitted.variant_files(
        "res/t/{model}/{variant}.parquet"
    )
    job = SimpleNamespace(model="m", variant="pca")
    assert frozen.job_variants(job) == ["pca"] and frozen.job_transforms(job) == ["old/m/pca.npz"]


def test_every_variant_is_aligned_in_one_job_unless_the_transforms_are_frozen():
    """One align job reads every model's table of every variant, variant by variant (the order
    scripts/align.py pairs them with the models in); with frozen transforms one job per variant."""
    run = inputs(results="res", models={"b": {}, "a": {}})
    assert run.align_job == "variants"
    assert run.variant_files("res/identifiability/align/{variant}.parquet") == [
        f"res/identifiability/align/{v}.parquet" for v in run.variants
    ]
    tables = run.align_tables(SimpleNamespace())
    assert tables == [f"res/transforms/{m}/{v}.parquet" for v in run.variants for m in ("a", "b")]
    frozen = inputs(results="res", models={"b": {}, "a": {}}, transforms={"frozen": "old"})
    assert frozen.align_job == "{variant}"
    assert frozen.align_tables(SimpleNamespace(variant="pca")) == [
        "res/transforms/a/pca.parquet",
        "res/transforms/b/pca.parquet",
    ]


def test_switched_off_readouts_read_nothing():
    run = inputs(classify={"map_readout": False}, biomap={"enabled": False}, sweep={"points": 0})
    assert run.maps() == [] and run.maps(["pca"]) == []
    assert run.biomap_tables() == [] and run.biomap_heatmaps() == []
    assert run.sweeps() == []
    on = inputs(biomap={"annotations": {"mine": "pairs.tsv"}, "efaar_wheel": "efaar.whl"})
    assert on.biomap_annotations() == ["pairs.tsv", "efaar.whl"]
    assert len(on.biomap_heatmaps()) == len(on.models) * len(on.variants)


def test_embed_rules_one_per_plate_or_one_per_group():
    single = embed_rules(inputs(results="res", embed={"plates_per_job": 1}))
    assert [r.name for r in single] == ["embed"]
    assert single[0].stores(SimpleNamespace(plate="P3")) == "res/screen/plates/P3.zarr"
    assert single[0].outputs == ["res/embed/{model}/{plate}.parquet"]
    groups = embed_rules(inputs(results="res", embed={"plates_per_job": 2}))
    assert [r.name for r in groups] == ["embed_g0000", "embed_g0001"]
    assert groups[1].stores == ["res/screen/plates/P3.zarr"]
    assert groups[0].outputs == ["res/embed/{model}/P1.parquet", "res/embed/{model}/P2.parquet"]
    assert groups[0].log_wildcards == "{model}/g0000"


def test_a_group_of_user_stores_with_two_channel_sets_stops_the_dag(tmp_path):
    import numpy as np

    from phenoica.contract import write_plate

    for plate, channels in (("P1", ["DNA", "ER"]), ("P2", ["DNA", "Mito"]), ("P3", ["DNA", "ER"])):
        write_plate(tmp_path / f"{plate}.zarr", np.zeros((4, 2, 8, 8), dtype=np.uint16), channels, chunk_images=4)
    run = inputs(
        screen={"source": "zarr", "plates_dir": str(tmp_path), "metadata": "m.parquet"}, embed={"plates_per_job": 2}
    )
    with pytest.raises(ScreenError, match=r"different channel sets.*\['DNA', 'Mito'\]: plates \['P2'\]"):
        embed_rules(run)
    assert [r.name for r in embed_rules(inputs(**{**run.config, "embed": {"plates_per_job": 1}}))] == ["embed"]


def test_rule_resources_override_the_defaults_key_by_key():
    res = {
        "default": {"cpus": 2, "mem_mb": 4000, "runtime": 60, "partition": "cpu"},
        "embed": {"cpus": 8, "mem_mb": None, "gpus": 1, "gpu_model": "h100", "partition": "gpu"},
        "report": {"runtime": 0},
    }
    assert rule_threads(res, "embed", 1) == 8 and rule_threads(res, "report", 1) == 2
    assert rule_threads({"default": {"cpus": None}}, "x", 3) == 3
    assert rule_resources(res, "embed") == {
        "mem_mb": 4000,
        "runtime": 60,
        "slurm_partition": "gpu",
        "gpu": 1,
        "gpu_model": "h100",
    }
    assert rule_resources(res, "report") == {"mem_mb": 4000, "runtime": 60, "slurm_partition": "cpu"}
