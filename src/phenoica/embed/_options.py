"""What an embedding job reads: :class:`EmbedOptions`, the ``embed`` rule's params (one model's
entry and the config's ``embed`` section), built once from the validated config."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.contract import Setting, stage_options


@stage_options("embed")
class EmbedOptions(NamedTuple):
    """How one model embeds plates: its ``models`` entry (``spec``) and the ``embed`` section.

    ``crop_size``: the crop side (None = the model's ``img_size``; :func:`~phenoica.embed.embed_plate`
    needs it set); ``intensity_max``: the intensity that scales to 1 (None = the dtype's maximum);
    ``batch_size``: crops per forward pass; ``chunk_images``: images streamed (and resumed) at a
    time (None = the store's chunk length); ``device`` (``auto``, ``cpu``, ``cuda``) and
    ``without_cuda`` (``fail`` or ``cpu``: what ``cuda`` does on a machine without one);
    ``threads``: torch's CPU threads (None = the job's); ``loader_threads``: chunks read ahead;
    ``compile``, ``compile_options``, ``compile_cache``: ``torch.compile`` and inductor's
    on-disk cache folder (:mod:`phenoica.embed._jobs`); ``plates_per_job``: plates one job
    embeds with one model (the workflow's grouping, :mod:`phenoica.embed._groups`).

    Build it with ``EmbedOptions.from_config(validate_config({...}), model=NAME)``: the schema
    states each key's bounds (a batch size, chunk length or reader count of at least 1), and the
    validated config holds them.
    """

    spec: Annotated[dict[str, Any], Setting("models.{model}")]
    crop_size: Annotated[int | None, Setting("embed.crop_size")]
    intensity_max: Annotated[float | None, Setting("embed.intensity_max")]
    batch_size: Annotated[int, Setting("embed.batch_size", run_time=True)]
    chunk_images: Annotated[int | None, Setting("embed.chunk_images", run_time=True)]
    device: Annotated[str, Setting("embed.device")]
    without_cuda: Annotated[str, Setting("embed.without_cuda")]
    threads: Annotated[int | None, Setting("embed.threads", run_time=True)]
    loader_threads: Annotated[int, Setting("embed.loader_threads", run_time=True)]
    compile: Annotated[bool, Setting("embed.compile", run_time=True)]
    compile_options: Annotated[dict[str, Any], Setting("embed.compile_options", run_time=True)]
    compile_cache: Annotated[str | None, Setting("embed.compile_cache", run_time=True)]
    plates_per_job: Annotated[int, Setting("embed.plates_per_job")]
