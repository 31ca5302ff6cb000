"""The file lists the rules read, decided from the validated config when the DAG is built.

``rules/common.smk`` builds one :class:`RuleInputs` (``INPUTS``) and the rules ask it for their inputs:
``INPUTS.store(plate)``, ``INPUTS.checkpoint(model)``, ``INPUTS.maps()``, ... Each method says which files a
rule reads and when a file is not read at all (an empty list: the readout, the gene map or the
sweep is off, the screen has no truth, a second model is missing). The paths are those of
:mod:`phenoica.contract._paths`; the user's own files (stores, checkpoints, embeddings, frozen
transforms) replace the workflow's where the config names them, and a rule that reads them takes
their content key as a param (``*_key`` methods: :mod:`phenoica.workflow._digests`), so a changed
file reruns what reads it whatever its modification time or link.

:func:`embed_rules` plans the embedding rules: one rule with a ``{plate}`` wildcard, or one rule
per group of ``embed.plates_per_job`` plates, written once in ``rules/embed.smk`` over this list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping

from snakemake.io import expand

from phenoica.contract import log_path, output_paths
from phenoica.embed import PlateJob, check_group_channels, embed_groups
from phenoica.transforms import swept_variants
from phenoica.workflow import _dag as dag
from phenoica.workflow import _digests as digests

#: The tables one biomap job writes (``{kind}`` of its table template).
BIOMAP_KINDS = ("neighbors", "guide_neighbors", "consistency", "recall", "coverage")
#: The gathered gene-map tables the report reads.
BIOMAP_GATHERED = ("recall", "coverage", "consistency", "neighbors", "batch_metrics")


@dataclass(frozen=True)
class RuleInputs:
    """The rules' input lists for one validated config and its plates (``{plate: batch}``)."""

    config: Mapping[str, Any]
    plates: Mapping[str, str]

    @property
    def out(self) -> SimpleNamespace:
        """Every output's template below the results folder (:func:`output_paths`)."""
        return output_paths(self.config["results"])

    @property
    def source(self) -> str:
        return self.config["screen"]["source"]

    @property
    def models(self) -> list[str]:
        """The models by name: the order of keys in a config file counts for nothing."""
        return sorted(self.config["models"])

    @property
    def scored_models(self) -> list[str]:
        """The models the readouts score and the hits call (``classify.models``)."""
        return dag.scored_models(self.config)

    @property
    def variants(self) -> list[str]:
        return list(self.config["transforms"]["variants"])

    def store(self, plate: str) -> str:
        """The plate's Zarr store: produced by the workflow, or the user's (source zarr)."""
        if self.source == "zarr":
            return f"{self.config['screen']['plates_dir']}/{plate}.zarr"
        return self.out.screen.store.format(plate=plate)

    def plate_digest(self, plate: str) -> str:
        """Content digest of one plate's rows in the user's metadata table or plate map, so a
        plate's jobs rerun only when its own rows change (the table itself is an ancient input)."""
        return digests.plate_digest(self.config, plate)

    def plate_store_digest(self, plate: str) -> str:
        """Content digest of the user's pixels of one plate (store, HCS plate or image files), so
        a store rewritten in place reruns that plate's jobs (a folder's time does not change then)."""
        return digests.plate_store_digest(self.config, plate)

    def training_stores_key(self, model: str) -> str | digests.NotKeyed:
        """Content key of the user's stores a model trains on (source zarr: train_mae reads them
        in place; a store's folder keeps its time when a chunk is rewritten);
        :data:`~phenoica.workflow._digests.NOT_KEYED` for the stores the workflow writes (outputs)."""
        if self.source != "zarr":
            return digests.NOT_KEYED
        plates = dag.training_plates(self.config, self.plates, model)
        return digests.hashed([f"{p}\0{digests.plate_store_digest(self.config, p)}" for p in plates])

    def checkpoint_key(self, model: str) -> str | digests.NotKeyed:
        """Content key of a model's configured checkpoint (the embed jobs' param);
        :data:`~phenoica.workflow._digests.NOT_KEYED` when train_mae writes it (its output)."""
        given = self.config["models"][model]["checkpoint"]
        return digests.files_key([given]) if given else digests.NOT_KEYED

    def checkpoint(self, model: str) -> str:
        """The encoder weights of a model: the configured checkpoint, or the one train_mae writes."""
        return self.config["models"][model]["checkpoint"] or self.out.embed.checkpoint.format(model=model)

    def embeddings(self, model: str) -> list[str]:
        """Per-plate embedding parquets of a model (or the user's files, source embeddings)."""
        if self.source == "embeddings":
            return dag.embedding_inputs(self.config, model)
        return expand(self.out.embed.embedding, model=model, plate=list(self.plates))

    def embeddings_key(self, model: str) -> str | digests.NotKeyed:
        """Content key of a model's embedding files (source embeddings: the user's Parquet,
        ``.h5ad`` or profile exports; gather_profiles's param); not keyed for the embed jobs' outputs."""
        return digests.files_key(self.embeddings(model)) if self.source == "embeddings" else digests.NOT_KEYED

    def _fitted(self, template: str, **wildcards: str) -> str:
        """A fitted-transform file: fitted here, or the frozen one (``transforms.frozen``, a
        folder laid out as the results' ``transforms/``)."""
        path = template.format(**wildcards)
        frozen = self.config["transforms"]["frozen"]
        return path.replace(f"{self.config['results']}/transforms", frozen, 1) if frozen else path

    def transform(self, model: str, variant: str) -> str:
        """A model's fitted transform of one variant."""
        return self._fitted(self.out.transforms.transform, model=model, variant=variant)

    @property
    def variant_job(self) -> str:
        """The wildcards of one job of the rules that read a variant's table (apply_transform,
        biomap_profiles, batch_metrics, map_readout), as their logs and benchmark files name it.

        ``{model}``: one job does every variant of a model, when the transforms are fitted here
        (one fit_transforms job rewrites all of a model's variant files together, so these jobs of
        one model rerun together anyway). ``{model}/{variant}`` with frozen transforms: a user's
        file of one variant may change alone, and then only that variant's jobs rerun.
        """
        return "{model}/{variant}" if self.config["transforms"]["frozen"] else "{model}"

    def variant_files(self, template: str, per_model: bool = False) -> list[str]:
        """One job's files of ``template``: every variant's (``{model}`` left a wildcard) for a job
        per model, else the template itself (``{variant}`` a wildcard). A job is per model as
        :attr:`variant_job` says, or when ``per_model``."""
        if "{variant}" in self.variant_job and not per_model:
            return [template]
        return expand(template, variant=self.variants, allow_missing=True)

    def job_variants(self, wildcards: Any) -> list[str]:
        """The variants one job does: its ``{variant}`` wildcard, or every variant (a job per model)."""
        variant = getattr(wildcards, "variant", None)
        return [variant] if variant else self.variants

    @property
    def align_job(self) -> str:
        """The wildcards of one align job, as its log and benchmark files name it: ``{variant}``
        with frozen transforms (a user's file of one variant may change alone), else
        ``variants``: one job aligns every variant, since each model's variants are refitted
        together and their alignments rerun together anyway (:attr:`variant_job`)."""
        return "{variant}" if self.config["transforms"]["frozen"] else "variants"

    def align_tables(self, wildcards: Any) -> list[str]:
        """Every model's table of each variant one align job does (:meth:`job_variants`),
        variant by variant, the models in name order within a variant."""
        template = self.out.transforms.variant
        return [template.format(model=m, variant=v) for v in self.job_variants(wildcards) for m in self.models]

    def job_transforms(self, wildcards: Any) -> list[str]:
        """The fitted transforms one apply_transform job reads, in the order of its variants
        (:meth:`job_variants`)."""
        return [self.transform(wildcards.model, v) for v in self.job_variants(wildcards)]

    def transforms_key(self, wildcards: Any) -> str | digests.NotKeyed:
        """Content key of the frozen transforms one apply_transform job reads (not keyed when
        they are fitted here: fit_transforms's outputs)."""
        frozen = self.config["transforms"]["frozen"]
        return digests.files_key(self.job_transforms(wildcards)) if frozen else digests.NOT_KEYED

    def fit_report(self, model: str) -> str:
        """The fit report beside a model's transforms."""
        return self._fitted(self.out.transforms.fit_report, model=model)

    def maps(self, variants: list[str] | None = None, model: str | None = None, kind: str = "map") -> list[str]:
        """copairs mAP tables per (model, variant), when the readout is on: of every scored model
        and variant, or of ``variants`` with ``{model}`` left a wildcard (``model=None`` and
        ``variants`` given) for a rule of one model. ``kind`` ``"retrieval"``: the replicate
        retrieval tables the same jobs write."""
        if not self.config["classify"]["map_readout"]:
            return []
        template = getattr(self.out.classify, kind)
        if variants is None:
            return expand(template, model=self.scored_models, variant=self.variants)
        return expand(template, variant=variants, model=model or "{model}")

    def reference(self) -> list[str]:
        """The reference readout's table, when ``screen.reference`` declares a reference."""
        return [self.out.hits.reference] if self.config["screen"]["reference"] else []

    def truth(self) -> list[str]:
        """The demo's per-guide ground truth (only the demo has one)."""
        return [self.out.screen.truth] if self.source == "demo" else []

    def aligns(self) -> list[str]:
        """Table 1 per variant, when there are two or more models to align."""
        if not (self.config["identifiability"]["align"] and len(self.models) >= 2):
            return []
        return expand(self.out.identifiability.align, variant=self.variants)

    def structurals(self) -> list[str]:
        """Factor-recovery scores per (model, variant), where ground-truth factors exist (demo)."""
        if not (self.config["identifiability"]["structural"] and self.source == "demo"):
            return []
        return expand(self.out.identifiability.structural, model=self.models, variant=self.variants)

    def biomap_annotations(self) -> list[str]:
        """Annotation files the map reads (user files and the EFAAR wheel): a change reruns it."""
        cfg = self.config["biomap"]
        return list(cfg["annotations"].values()) + ([cfg["efaar_wheel"]] if cfg["efaar_wheel"] else [])

    def annotations_key(self) -> str | digests.NotKeyed:
        """Content key of the annotation files of :meth:`biomap_annotations` (the biomap job's param)."""
        return digests.files_key(self.biomap_annotations())

    def report_files_key(self) -> str | digests.NotKeyed:
        """Content key of the user's files the report reads: the annotation files and the frozen
        transforms' fit reports (those fitted here are outputs)."""
        frozen = [self.fit_report(m) for m in self.models] if self.config["transforms"]["frozen"] else []
        return digests.files_key(self.biomap_annotations() + frozen)

    def biomap_tables(self) -> list[str]:
        """The gathered gene-map tables the report reads (none when biomap.enabled is off)."""
        if not self.config["biomap"]["enabled"]:
            return []
        return expand(self.out.biomap.gathered, kind=BIOMAP_GATHERED)

    def biomap_heatmaps(self) -> list[str]:
        """One clustered gene-map heatmap per (scored model, variant), when biomap is on."""
        if not self.config["biomap"]["enabled"]:
            return []
        return expand(self.out.biomap.heatmap, model=self.scored_models, variant=self.variants)

    def sweeps(self) -> list[str]:
        """The component sweep per model of ``sweep.models`` (none with frozen
        transforms or ``sweep.points`` 0)."""
        if self.config["transforms"]["frozen"] or not self.config["sweep"]["points"]:
            return []
        return expand(self.out.sweep.table, model=dag.swept_models(self.config))

    def sweep_logs(self) -> list[str]:
        """The logs of the sweep's point jobs of every model of :meth:`sweeps` (the report lists
        the points they skipped)."""
        variants = swept_variants(self.variants)
        points = range(self.config["sweep"]["points"])
        return [
            log_path(self.config["results"], "sweep_point", f"{Path(p).stem}/{v}/point_{i}")
            for p in self.sweeps()
            for v in variants
            for i in points
        ]

    def sweep_points(self) -> list[str]:
        """One model's grid points of the component sweep, every swept variant's (``{model}`` left
        a wildcard): ``sweep.points`` of each (a point the grid does not reach writes no row)."""
        variants = swept_variants(self.variants)
        return expand(
            self.out.sweep.point, variant=variants, point=range(self.config["sweep"]["points"]), allow_missing=True
        )


@dataclass(frozen=True)
class EmbedRule:
    """One embedding rule: its name, the stores and metadata it reads, the embeddings it writes
    (``{model}`` a wildcard) and the wildcards part of its log and benchmark paths."""

    name: str
    stores: list[str] | Callable[[Any], str]
    metadata: list[str] | str
    outputs: list[str]
    log_wildcards: str


def embed_rules(inputs: RuleInputs) -> list[EmbedRule]:
    """The embedding rules: with ``embed.plates_per_job`` 1 one rule ``embed`` over ``{plate}``;
    above 1 one rule ``embed_g0000, ...`` per group of plates (:func:`embed_groups`), each
    group's stores checked for one channel set per model first when they are the user's
    (source zarr: they exist when the DAG is built)."""
    out = inputs.out
    per_job = inputs.config["embed"]["plates_per_job"]
    if per_job == 1:
        return [
            EmbedRule(
                "embed", lambda w: inputs.store(w.plate), out.screen.metadata, [out.embed.embedding], "{model}/{plate}"
            )
        ]
    groups = embed_groups(list(inputs.plates), per_job)
    if inputs.source == "zarr":
        check_groups_channels(inputs, groups)
    return [
        EmbedRule(
            f"embed_{group}",
            [inputs.store(p) for p in plates],
            expand(out.screen.metadata, plate=plates),
            expand(out.embed.embedding, model="{model}", plate=plates),
            f"{{model}}/{group}",
        )
        for group, plates in groups.items()
    ]


def check_groups_channels(inputs: RuleInputs, groups: Mapping[str, list[str]]) -> None:
    """Every group of plates feeds each model one channel set (ScreenError naming the plates
    of each set otherwise, :func:`check_group_channels`)."""
    for model, spec in inputs.config["models"].items():
        for plates in groups.values():
            jobs = [PlateJob(Path(inputs.store(p)), None, Path(f"{p}.parquet")) for p in plates]  # type: ignore[arg-type]
            check_group_channels(jobs, spec.get("channels"), f"models.{model}.channels")


def replaced_folders(out: Any, plates: Iterable[str], source: str) -> tuple[list[str], list[str]]:
    """(the folders a rerun replaces whole, the plate stores phenoica writes) of a run: the
    report's ``directory()`` outputs, and each plate's store below the results folder (not for
    source ``zarr``, whose stores are the user's). ``out`` is the run's output table
    (:func:`phenoica.contract.output_paths`); the results folder's check
    (:func:`phenoica.workflow.check_results_folder`) holds them to the files phenoica wrote."""
    report = out.report
    folders = [report.figures, report.tables, report.gallery, report.interactive_assets]
    stores = [] if source in ("zarr", "embeddings") else [out.screen.store.format(plate=p) for p in plates]
    return folders, stores
