"""Studies: self-contained reproductions beside the screen workflow (e.g. ``disentangle``, Nelson et al. 2026 Table 2).

Its face (``__all__``) is what the rules plan with (:mod:`._plan`: the jobs each study plans,
importable without torch); the two studies, :mod:`.bilipschitz` and :mod:`.disentangle`, are
subpackages with faces of their own (their rules' options, their jobs' functions)."""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_plan": ["AE_DERIVED", "alpha_label", "dataset_groups"],
    },
)
