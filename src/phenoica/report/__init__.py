"""The report stage: the report as a list of sections (:mod:`phenoica.report.sections`), the tables
(:mod:`phenoica.report.summaries`), the figures, the page renderer, the gene-map and component-sweep
sections, and the companion pages (hit gallery, interactive results page)."""
