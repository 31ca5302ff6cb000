"""Display names and colours of a screen's channels (config ``channels``), for the gallery.

Defaults exist for Cell Painting's five stains plus brightfield, in the colours of the RxRx
(Recursion) RGB conversion that the field's published galleries use: DNA (Hoechst) blue, ER
(concanavalin A) green, RNA (SYTO 14) cyan, AGP (phalloidin / actin) red, Mito (MitoTracker)
magenta; Golgi / plasma membrane (WGA, a channel of its own in the six-stain RxRx layout)
yellow; brightfield grey, left out of the composite. A screen channel takes its default by name,
case-insensitively, through the aliases below (e.g. ``nucleus``, ``hoechst`` and ``dapi`` are
DNA). A channel with neither a configured nor a default style gets the next colour of
:data:`FALLBACK` and its own name; the figure's header shows every colour used.

Config: ``channels: {<screen channel>: {label: ..., colour: "#rrggbb", composite: true}}``;
naming a channel the screen lacks is an error that names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class ChannelStyle:
    """How one screen channel is drawn: its label, its colour (``#rrggbb``) and whether it
    goes into the composite."""

    name: str
    label: str
    hex: str
    in_composite: bool = True

    @property
    def rgb(self) -> tuple[float, float, float]:
        return tuple(int(self.hex[i : i + 2], 16) / 255 for i in (1, 3, 5))  # type: ignore[return-value]


#: Cell Painting (+ brightfield): label, colour, in composite, lower-case aliases.
CELL_PAINTING: dict[str, tuple[str, str, bool, tuple[str, ...]]] = {
    "DNA": ("DNA", "#1300f9", True, ("dna", "hoechst", "dapi", "nucleus", "nuclei")),
    "ER": ("ER", "#2aff1f", True, ("er", "cona", "concanavalin", "endoplasmic_reticulum")),
    "RNA": ("RNA", "#2dfffc", True, ("rna", "syto14", "syto", "nucleoli")),
    "AGP": ("AGP", "#ff0019", True, ("agp", "actin", "phalloidin")),
    "Mito": ("Mito", "#fa00fd", True, ("mito", "mitotracker", "mitochondria")),
    "Golgi": ("Golgi/PM", "#feff28", True, ("golgi", "wga", "plasma_membrane")),
    "Brightfield": ("Brightfield", "#bfbfbf", False, ("brightfield", "bf", "phase", "dpc")),
}
#: Colours for channels without a default, in order.
FALLBACK: tuple[str, ...] = ("#ff8c00", "#8a2be2", "#00ced1", "#ffd700", "#ff1493", "#7fff00")


def default_style(name: str) -> ChannelStyle | None:
    """The Cell Painting default of a channel name (through the aliases), if any."""
    key = name.strip().casefold().replace(" ", "_").replace("-", "_")
    for canonical, (label, colour, comp, aliases) in CELL_PAINTING.items():
        if key == canonical.casefold() or key in aliases:
            shown = label if key == canonical.casefold() else f"{name} ({label})"
            return ChannelStyle(name, shown, colour, comp)
    return None


def _hex(value: Any, where: str) -> str:
    text = str(value)
    if not (len(text) == 7 and text[0] == "#" and all(c in "0123456789abcdefABCDEF" for c in text[1:])):
        raise ValueError(f"{where}: colour {text!r} is not of the form #rrggbb")
    return text.lower()


def channel_styles(
    screen_channels: Sequence[str], configured: Mapping[str, Mapping[str, Any]] | None = None
) -> list[ChannelStyle]:
    """The style of every screen channel, in the screen's order: configured, else the Cell
    Painting default, else a :data:`FALLBACK` colour. A configured channel the screen lacks is an
    error naming it and the screen's channels."""
    configured = dict(configured or {})
    unknown = [c for c in configured if c not in set(screen_channels)]
    if unknown:
        raise ValueError(
            f"config channels: {unknown} name channel(s) the screen lacks; its channels are {list(screen_channels)}"
        )
    styles, spare = [], iter(FALLBACK * (1 + len(screen_channels) // len(FALLBACK)))
    for name in screen_channels:
        base = default_style(name) or ChannelStyle(name, name, next(spare))
        given = configured.get(name) or {}
        styles.append(
            ChannelStyle(
                name,
                str(given.get("label", base.label)),
                _hex(given["colour"], f"config channels.{name}.colour") if "colour" in given else base.hex,
                bool(given.get("composite", base.in_composite)),
            )
        )
    return styles


def tint(channel: np.ndarray, rgb: tuple[float, float, float]) -> np.ndarray:
    """An (H, W) channel scaled to [0, 1] as an (H, W, 3) image in its colour."""
    return np.clip(channel, 0, 1)[..., None] * np.asarray(rgb, dtype=np.float32)


def composite_rgb(channels: np.ndarray, colours: Sequence[tuple[float, float, float]]) -> np.ndarray:
    """The additive composite of (C, H, W) scaled channels in their colours, clipped to [0, 1]."""
    if len(channels) == 0:
        return np.zeros((*channels.shape[1:], 3), dtype=np.float32)
    out = sum(tint(c, rgb) for c, rgb in zip(channels, colours))
    return np.clip(out, 0, 1)
