"""Encoders the embedding stage can use, one module per job.

* :mod:`~phenoica.models.vit`: phenoica's own timm ViT (standard or channel-agnostic), its
  checkpoints and strict loading;
* :mod:`~phenoica.models.openphenom`: the published OpenPhenom (channel-agnostic MAE) layout;
* :mod:`~phenoica.models.timm_models`: stock timm models from a local checkpoint;
* :mod:`~phenoica.models.layouts`: which layout a checkpoint's keys are;
* :mod:`~phenoica.models.checkpoint`: reading checkpoint files (safetensors or torch pickles);
* :mod:`~phenoica.models.registry`: the architectures, each builder registered under its name
  (``register_model``, as timm's);
* :mod:`~phenoica.models.extractor`: the declared extractor interface the embed and validate
  stages read, and the plate/model fit check both call;
* :mod:`~phenoica.models.builders`: config entry -> :class:`FeatureExtractor` (``create_model``
  by the registry, then pooling, block, per-channel embeddings);
* :mod:`~phenoica.models.device`: the torch device of a job;
* :mod:`~phenoica.models.mae`: MAE pretraining of phenoica's ViT (rule ``train_mae``), its
  settings :class:`~phenoica.models.options.TrainOptions` (:mod:`~phenoica.models.options`);
* :mod:`~phenoica.models.spec`: the keys of a ``models`` entry that decide the ViT and its training.
"""

__all__ = [
    "builders",
    "checkpoint",
    "device",
    "extractor",
    "layers",
    "layouts",
    "mae",
    "openphenom",
    "options",
    "registry",
    "spec",
    "timm_models",
    "vit",
]
