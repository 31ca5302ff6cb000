# The face of phenoica.studies.disentangle for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._data import eval_index as eval_index
from ._data import load_dataset as load_dataset
from ._data import procedural_dataset as procedural_dataset
from ._data import scenes_dataset as scenes_dataset
from ._evaluate import DISENTANGLE_SCORES as DISENTANGLE_SCORES
from ._evaluate import derived_latents as derived_latents
from ._evaluate import evaluate as evaluate
from ._evaluate import score_latents as score_latents
from ._model import FactorAE as FactorAE
from ._model import build_model as build_model
from ._model import encode as encode
from ._model import train_and_encode as train_and_encode
from ._model import train_model as train_model
from ._options import DisentangleEvaluateOptions as DisentangleEvaluateOptions
from ._options import DisentangleReportOptions as DisentangleReportOptions
from ._options import DisentangleTrainOptions as DisentangleTrainOptions
from ._report import verdict as verdict
from ._report import write_report as write_report

__all__ = [
    "build_model",
    "derived_latents",
    "DISENTANGLE_SCORES",
    "DisentangleEvaluateOptions",
    "DisentangleReportOptions",
    "DisentangleTrainOptions",
    "encode",
    "eval_index",
    "evaluate",
    "FactorAE",
    "load_dataset",
    "procedural_dataset",
    "scenes_dataset",
    "score_latents",
    "train_and_encode",
    "train_model",
    "verdict",
    "write_report",
]
