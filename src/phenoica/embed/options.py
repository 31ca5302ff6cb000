"""The embedding settings of a job (the config's ``embed`` section), read once: :class:`EmbedOptions`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from phenoica.contract.config import resolve_section


@dataclass(frozen=True)
class EmbedOptions:
    """How plates are embedded: the config's ``embed`` section (:meth:`from_config`).

    ``crop_size``: the crop side (None = the model's ``img_size``; :func:`~phenoica.embed.plate.embed_plate`
    needs it set); ``intensity_max``: the intensity that scales to 1 (None = the dtype's maximum);
    ``batch_size``: crops per forward pass; ``chunk_images``: images streamed (and resumed) at a
    time (None = the store's chunk length); ``device`` (``auto``, ``cpu``, ``cuda``) and
    ``without_cuda`` (``fail`` or ``cpu``: what ``cuda`` does on a machine without one);
    ``threads``: torch's CPU threads (None = the job's); ``loader_threads``: chunks read ahead;
    ``preprocess_on_device``: ship raw tiles to the device and prepare them there (None = on
    CUDA only; not a config key); ``compile``, ``compile_options``, ``compile_cache``:
    ``torch.compile`` and inductor's on-disk cache folder (:mod:`phenoica.embed.jobs`).
    """

    crop_size: int | None
    intensity_max: float | None
    batch_size: int
    chunk_images: int | None
    device: str
    without_cuda: str
    threads: int | None
    loader_threads: int
    compile: bool
    compile_options: Mapping[str, Any]
    compile_cache: str | None
    preprocess_on_device: bool | None = None

    @classmethod
    def from_config(cls, embed: Mapping[str, Any] | None) -> EmbedOptions:
        """The options of the config's ``embed`` section (``config["embed"]``; in a job, the
        ``embed`` of :func:`phenoica.workflow.params.rule_settings`), resolved here once against the
        schema (:func:`phenoica.contract.config.resolve_section`: absent keys take the schema's
        defaults, a section already resolved is not validated again); keys that are not embedding
        settings (``plates_per_job``) are left to the workflow."""
        section = resolve_section("embed", embed)
        return cls(
            crop_size=section["crop_size"],
            intensity_max=section["intensity_max"],
            batch_size=int(section["batch_size"]),
            chunk_images=section["chunk_images"],
            device=str(section["device"]),
            without_cuda=str(section["without_cuda"]),
            threads=section["threads"],
            loader_threads=int(section["loader_threads"]),
            compile=bool(section["compile"]),
            compile_options=dict(section["compile_options"] or {}),
            compile_cache=section["compile_cache"],
        )

    @classmethod
    def defaults(cls, **changes: Any) -> EmbedOptions:
        """The schema's ``embed`` defaults with ``changes``: ``embed`` keys (validated by the
        schema) and ``preprocess_on_device``, which is no config key."""
        own = {k: changes.pop(k) for k in ("preprocess_on_device",) if k in changes}
        return dataclasses.replace(cls.from_config(changes), **own)

    def check(self) -> None:
        """ValueError for a batch size, chunk length or reader count below 1."""
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.chunk_images is not None and self.chunk_images < 1:
            raise ValueError(f"chunk_images must be >= 1, got {self.chunk_images}")
        if self.loader_threads < 1:
            raise ValueError(f"loader_threads must be >= 1, got {self.loader_threads}")
