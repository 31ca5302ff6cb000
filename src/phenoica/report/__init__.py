"""The report stage: the report as a list of sections (:mod:`phenoica.report.sections`), the tables
(:mod:`phenoica.report.summaries`), the figures, the page renderer, the gene-map and component-sweep
sections, the companion pages (hit gallery, interactive results page), and the scoring of a
finished known-truth run (:mod:`phenoica.report.positive_control`)."""
