"""Rule ``embed``: streaming, resumable embedding of plate stores, one embedding per image.

* :mod:`~phenoica.embed._groups`: which plates a job takes (:func:`~phenoica.embed.embed_groups`),
  planned when the DAG is built, without torch;
* :mod:`~phenoica.embed._jobs`: the rule's function (:func:`~phenoica.embed.embed_model_plates`):
  one model built (and compiled) once for the job's plates, unchanged plates kept;
* :mod:`~phenoica.embed._options`: what a job reads of the config, its model's entry and the
  ``embed`` section, read once (:class:`~phenoica.embed.EmbedOptions`);
* :mod:`~phenoica.embed._plate`: one plate store through one model
  (:func:`~phenoica.embed.embed_plate`);
* :mod:`~phenoica.embed._chunks`: the overlapped chunk loop (read, prepare, embed, write) and its timing;
* :mod:`~phenoica.embed._parts`: the resumable parts and the final parquet assembled from them.

What a model takes and whether a plate fits it is declared in :mod:`phenoica.models._extractor`.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_chunks": ["EmbedTiming", "TIMING_KEY"],
        "_groups": ["PlateJob", "check_group_channels", "embed_groups"],
        "_jobs": ["EmbedJob", "embed_model_plates"],
        "_options": ["EmbedOptions"],
        "_parts": ["embedding_metadata"],
        "_plate": ["PlateModel", "embed_plate"],
    },
)
