"""The report stage: the report as a list of sections (:mod:`phenoica.report._sections`), the tables
(:mod:`phenoica.report._summaries`), the figures, the page renderer, the gene-map and component-sweep
sections, the companion pages (hit gallery, interactive results page), and the scoring of a
finished known-truth run (:mod:`phenoica.report.known_truth_section`).

Its face (``__all__``, each name loaded from its module on first use, so the page renderer
alone loads no plotly): ``ReportOptions`` (the report rule's params), ``ReportInputs`` and
``read_inputs``, ``write_report`` and ``SECTIONS``, the page renderer the studies share
(``Page``, ``PageSection``, ``write_page``, ...), ``heatmap_figure`` (the heatmap the biomap
stage draws), the hit gallery and the interactive page. :mod:`.anndata` and
:mod:`.known_truth_section` are command lines."""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_channels": ["channel_styles"],
        "_gallery": ["select_sites", "write_gallery"],
        "_gene_maps": ["heatmap_figure"],
        "_inputs": ["ReportInputs", "read_biomap", "read_inputs"],
        "_interactive": ["ASSETS", "PAGE", "PageInputs", "write_interactive"],
        "_options": ["ReportOptions"],
        "_render": [
            "Block",
            "Figure",
            "Links",
            "Page",
            "PageSection",
            "Table",
            "read_verdict",
            "save_figure",
            "write_page",
            "write_verdict",
        ],
        "_sections": ["ReportLayout", "Section"],
        "_truth_stats": ["shifted_factors"],
        "_write": ["SECTIONS", "write_report"],
    },
)
