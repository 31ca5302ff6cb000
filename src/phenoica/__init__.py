"""phenoica: identifiable representations for cell-microscopy screens.

A Snakemake workflow plus this library: MAE embedding of plate tiles, PCA whitening, ICA and
random-rotation variants, batch-held-out LightGBM scoring per guide, identifiability and the
method paper's studies. Every rule's logic is a function in a submodule here.
"""

__version__ = "0.1.0"
