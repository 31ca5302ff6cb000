"""Studies: self-contained reproductions beside the screen workflow (e.g. ``disentangle``, Nelson et al. 2026 Table 2)."""
