"""The embedding settings of a job (the config's ``embed`` section), read once: :class:`EmbedOptions`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


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

    crop_size: int | None = None
    intensity_max: float | None = None
    batch_size: int = 128
    chunk_images: int | None = None
    device: str = "auto"
    without_cuda: str = "fail"
    threads: int | None = None
    loader_threads: int = 1
    preprocess_on_device: bool | None = None
    compile: bool = False
    compile_options: Mapping[str, Any] = field(default_factory=dict)
    compile_cache: str | None = None

    @classmethod
    def from_config(cls, embed: Mapping[str, Any]) -> EmbedOptions:
        """The options of a validated config's ``embed`` section (``config["embed"]``, after
        :func:`phenoica.workflow.params.with_speed_settings` in a job); keys it lacks keep the defaults,
        keys that are not embedding settings (``plates_per_job``) are left to the workflow."""
        return cls(
            crop_size=embed.get("crop_size"),
            intensity_max=embed.get("intensity_max"),
            batch_size=int(embed.get("batch_size", 128)),
            chunk_images=embed.get("chunk_images"),
            device=str(embed.get("device", "auto")),
            without_cuda=str(embed.get("without_cuda", "fail")),
            threads=embed.get("threads"),
            loader_threads=int(embed.get("loader_threads", 1)),
            compile=bool(embed.get("compile")),
            compile_options=dict(embed.get("compile_options") or {}),
            compile_cache=embed.get("compile_cache"),
        )

    def check(self) -> None:
        """ValueError for a batch size, chunk length or reader count below 1."""
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.chunk_images is not None and self.chunk_images < 1:
            raise ValueError(f"chunk_images must be >= 1, got {self.chunk_images}")
        if self.loader_threads < 1:
            raise ValueError(f"loader_threads must be >= 1, got {self.loader_threads}")
