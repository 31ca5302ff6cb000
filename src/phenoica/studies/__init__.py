"""Studies: self-contained reproductions beside the screen workflow (e.g. ``disentangle``, PAPER.md Table 2)."""
