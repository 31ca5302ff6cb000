"""Rule ``embed``: streaming, resumable embedding of plate stores, one embedding per image.

* :mod:`~phenoica.embed.groups`: which plates a job takes (:func:`~phenoica.embed.groups.embed_groups`),
  planned when the DAG is built, without torch;
* :mod:`~phenoica.embed.jobs`: the rule's function (:func:`~phenoica.embed.jobs.embed_model_plates`):
  one model built (and compiled) once for the job's plates, unchanged plates kept;
* :mod:`~phenoica.embed.options`: what a job reads of the config, its model's entry and the
  ``embed`` section, read once (:class:`~phenoica.embed.options.EmbedOptions`);
* :mod:`~phenoica.embed.plate`: one plate store through one model
  (:func:`~phenoica.embed.plate.embed_plate`);
* :mod:`~phenoica.embed.chunks`: the overlapped chunk loop (read, prepare, embed, write) and its timing;
* :mod:`~phenoica.embed.parts`: the resumable parts and the final parquet assembled from them.

What a model takes and whether a plate fits it is declared in :mod:`phenoica.models.extractor`.
"""

__all__ = ["chunks", "groups", "jobs", "options", "parts", "plate"]
