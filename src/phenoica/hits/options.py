"""What the hit calls read: :class:`HitOptions`, the ``call_hits`` rule's params."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from phenoica.contract.stage_options import Setting, stage_options


@stage_options("call_hits")
class HitOptions(NamedTuple):
    """The settings of the hit calls, built once from the validated config.

    ``null_model`` (``parametric`` or ``empirical``) gives each guide's p-value against the
    pseudo-guides, ``q_threshold`` the Benjamini-Hochberg q below which a guide, gene or control
    construct is called; ``n_null_guides`` 0 means no null, so no p-values and no calls
    (:attr:`with_null`).
    """

    null_model: Annotated[str, Setting("hits.null_model")]
    q_threshold: Annotated[float, Setting("hits.q_threshold")]
    n_null_guides: Annotated[int, Setting("classify.n_null_guides")]

    @property
    def with_null(self) -> bool:
        """Whether the screen has pseudo-guides, so p-values, q-values and calls."""
        return self.n_null_guides > 0
