"""Studies: self-contained reproductions beside the screen workflow (e.g. ``disentangle``, Nelson et al. 2026 Table 2).

The public API is its modules: :mod:`.plan` (the jobs each study plans, importable without torch)
and the two studies, :mod:`.bilipschitz` and :mod:`.disentangle` (each with its rules' options in
its ``options`` module)."""

__all__ = ["bilipschitz", "disentangle", "plan"]
