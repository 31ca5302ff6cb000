"""What the identifiability jobs read: :class:`Table1Options` (rule ``align``) and
:class:`StructuralOptions` (rule ``structural``), each the rule's params."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from phenoica.contract import Setting, stage_options


@stage_options("align")
class Table1Options(NamedTuple):
    """The settings of one variant's Table 1 (every ordered pair of models), built once from the
    validated config.

    At most ``max_samples`` matched images (seeded subsample) enter; the maps are fitted on a
    seeded ``train_fraction`` of them. ``ica`` is the ICA algorithm, ``ica_components`` the
    components each model's ICA keeps on the base variant (whitened variants keep every
    dimension: :meth:`phenoica.identifiability.AlignOptions.for_variant`),
    ``ica_max_samples`` its training rows; ``knn_k`` the neighbours of the mutual kNN.
    """

    seed: Annotated[int, Setting("seed")]
    train_fraction: Annotated[float, Setting("identifiability.train_fraction")]
    ica: Annotated[str, Setting("identifiability.ica")]
    ica_components: Annotated[int | float | str, Setting("identifiability.ica_components")]
    ica_max_samples: Annotated[int, Setting("identifiability.ica_max_samples")]
    knn_k: Annotated[int, Setting("identifiability.knn_k")]
    max_samples: Annotated[int, Setting("identifiability.max_samples")]


@stage_options("structural")
class StructuralOptions(NamedTuple):
    """The settings of one (model, variant)'s factor recovery, built once from the validated config.

    At most ``max_samples`` rows (seeded subsample) enter the kNN mutual information and the
    regressions of InfoMEC; continuous factors are cut into ``factor_bins`` quantile bins;
    ``infoe_max_iter`` bounds InfoE's lbfgs iterations.
    """

    seed: Annotated[int, Setting("seed")]
    max_samples: Annotated[int, Setting("identifiability.max_samples")]
    factor_bins: Annotated[int, Setting("identifiability.factor_bins")]
    infoe_max_iter: Annotated[int, Setting("identifiability.infoe_max_iter")]
