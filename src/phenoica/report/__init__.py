"""The report stage: the report as a list of sections (:mod:`phenoica.report.sections`), the tables
(:mod:`phenoica.report.summaries`), the figures, the page renderer, the gene-map and component-sweep
sections, the companion pages (hit gallery, interactive results page), and the scoring of a
finished known-truth run (:mod:`phenoica.report.known_truth_section`).

The public API is its modules (importing them here would load pandas, matplotlib and plotly
wherever the page renderer alone is needed): :mod:`.options` (``ReportOptions``, the report
rule's params), :mod:`.inputs` (``ReportInputs``, ``read_inputs``), :mod:`.write`
(``write_report``, ``SECTIONS``), :mod:`.render` (the page renderer the studies share),
:mod:`.gene_maps` (the heatmap the biomap stage draws), :mod:`.anndata` and
:mod:`.known_truth_section` (command lines)."""

__all__ = ["anndata", "gene_maps", "inputs", "known_truth_section", "options", "render", "write"]
