# The face of phenoica.models for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._builders import FeatureExtractor as FeatureExtractor
from ._builders import build_feature_extractor as build_feature_extractor
from ._builders import create_model as create_model
from ._checkpoint import CheckpointError as CheckpointError
from ._checkpoint import file_sha256 as file_sha256
from ._declared import DeclaredViT as DeclaredViT
from ._declared import declared_model as declared_model
from ._device import InFlight as InFlight
from ._device import Staging as Staging
from ._device import keep_freed_memory as keep_freed_memory
from ._device import resolve_device as resolve_device
from ._extractor import Extractor as Extractor
from ._extractor import embed_crops as embed_crops
from ._extractor import inference_context as inference_context
from ._extractor import module_inputs as module_inputs
from ._extractor import probe_feature_dim as probe_feature_dim
from ._mae import record_training as record_training
from ._mae import train_mae as train_mae
from ._openphenom import NORMALIZE as NORMALIZE
from ._openphenom import OpenPhenomGeometry as OpenPhenomGeometry
from ._openphenom import build_openphenom as build_openphenom
from ._options import TrainOptions as TrainOptions
from ._plate_fit import ModelInputs as ModelInputs
from ._plate_fit import check_fit as check_fit
from ._plate_fit import rejected_crops as rejected_crops
from ._plate_fit import screen_subject as screen_subject
from ._registry import register_model as register_model
from ._spec import training_spec as training_spec
from ._timm_models import check_timm_name as check_timm_name

__all__ = [
    "build_feature_extractor",
    "build_openphenom",
    "check_fit",
    "check_timm_name",
    "CheckpointError",
    "create_model",
    "declared_model",
    "DeclaredViT",
    "embed_crops",
    "Extractor",
    "FeatureExtractor",
    "file_sha256",
    "inference_context",
    "InFlight",
    "keep_freed_memory",
    "ModelInputs",
    "module_inputs",
    "NORMALIZE",
    "OpenPhenomGeometry",
    "probe_feature_dim",
    "record_training",
    "register_model",
    "rejected_crops",
    "resolve_device",
    "screen_subject",
    "Staging",
    "train_mae",
    "training_spec",
    "TrainOptions",
]
