"""The demo screen generator: a small synthetic CRISPR screen in the data contract's format.

Generative model, per image:

1. Morphology factors ``factor_00 ...`` are drawn independently, each from its own
   non-Gaussian distribution (uniform, Laplace, skewed, bimodal), standardized to zero mean
   and unit SD (``FACTORS`` lists what each one controls).
2. A guide of a gene with an effect adds ``sign * effect_size * efficacy`` to each of its
   gene's ``factors_per_gene`` affected factors; null genes and controls add nothing. Genes
   with an effect are grouped into ``n_complexes`` complexes of ``genes_per_complex`` genes
   whose members shift the same factors with the same signs (their guides' efficacies still
   differ), plus a complex-free remainder. Gene symbols come from real CORUM complexes
   (``complex_design``), so a complex's members are a real complex's members. Gene and
   guide effects derive from the global seed only, so they are identical on every plate.
3. Cells are rendered from the factors into multi-channel images (nucleus, ER, actin,
   mitochondria, Golgi roles; see ``channel_roles``): cells partition the field like a
   weighted Voronoi diagram of ellipses, nuclei (lobed ellipses) sit inside them, textures are
   band-passed noise (``skimage.filters.difference_of_gaussians``) and organelles are blurred
   point processes. The factors are phenotypes as real perturbations show them, chosen to
   survive the MAE's per-image, per-channel instance normalization: cell count and density,
   cell and nucleus size and shape, texture, subcellular localization (a marker moving from
   cytoplasm to nucleus, or from diffuse to puncta) and the balance between compartments of
   one channel. None of them only scales a channel's intensity (normalization erases that).
4. Nuisance (batch) effects follow the microscope: magnification (apparent cell size and
   count), channel bleed-through, defocus blur, illumination gradient and vignetting,
   per-channel gamma, gain and background offset, then pixel noise; drawn per batch (seed,
   batch), per plate (seed, plate) and per image (seed, plate), all scaled by
   ``batch_strength``.

The saved factors are the values used to render (after gene shifts, before nuisance);
``nuisance_*`` columns hold each image's nuisance parameters. Everything is deterministic
given the seed; plate outputs depend only on (seed, plate name, demo sizes), not on how many
other plates the screen has.

Modules: :mod:`._design` (factors, genes, guides, effects), :mod:`._layout` (plates), :mod:`._cells`
(cells into images), :mod:`._nuisance` (the microscope's batch effects) and :mod:`._plates` (a
plate and the whole screen in the data contract), all reading the demo's settings from
:class:`phenoica.screen.DemoOptions`.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_design": ["gene_truth"],
        "_plates": ["simulate_screen", "write_demo_plate"],
    },
)
