"""Encoders the embedding stage can use, one module per job.

* :mod:`~phenoica.models._vit`: phenoica's own timm ViT (standard or channel-agnostic), its
  checkpoints and strict loading;
* :mod:`~phenoica.models._openphenom`: the published OpenPhenom (channel-agnostic MAE) layout;
* :mod:`~phenoica.models._timm_models`: stock timm models from a local checkpoint;
* :mod:`~phenoica.models._layouts`: which layout a checkpoint's keys are;
* :mod:`~phenoica.models._checkpoint`: reading checkpoint files (safetensors or torch pickles);
* :mod:`~phenoica.models._registry`: the architectures, each builder registered under its name
  (``register_model``, as timm's);
* :mod:`~phenoica.models._extractor`: the declared extractor interface the embed and validate
  stages read;
* :mod:`~phenoica.models._plate_fit`: what those stages know of a model before any crop (torch-free),
  and the plate/model fit check both call;
* :mod:`~phenoica.models._declared`: the geometry of phenoica's own ViT read from its spec
  alone, so that the check of the whole screen builds no network (torch-free);
* :mod:`~phenoica.models._builders`: config entry -> :class:`FeatureExtractor` (``create_model``
  by the registry, then pooling, block, per-channel embeddings);
* :mod:`~phenoica.models._device`: the torch device of a job;
* :mod:`~phenoica.models._mae`: MAE pretraining of phenoica's ViT (rule ``train_mae``), its
  settings :class:`~phenoica.models.TrainOptions` (:mod:`~phenoica.models._options`);
* :mod:`~phenoica.models._spec`: the keys of a ``models`` entry that decide the ViT and its training.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_builders": ["FeatureExtractor", "build_feature_extractor", "create_model"],
        "_checkpoint": ["CheckpointError", "file_sha256"],
        "_device": ["InFlight", "Staging", "keep_freed_memory", "resolve_device"],
        "_extractor": [
            "Extractor",
            "embed_crops",
            "inference_context",
            "module_inputs",
            "probe_feature_dim",
        ],
        "_plate_fit": ["ModelInputs", "check_fit", "rejected_crops", "screen_subject"],
        "_declared": ["DeclaredViT", "declared_model"],
        "_mae": ["record_training", "train_mae"],
        "_openphenom": ["NORMALIZE", "OpenPhenomGeometry", "build_openphenom"],
        "_options": ["TrainOptions"],
        "_registry": ["register_model"],
        "_spec": ["training_spec"],
        "_timm_models": ["check_timm_name"],
    },
)
