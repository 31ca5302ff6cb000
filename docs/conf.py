"""Sphinx configuration of phenoica's documentation (MyST Markdown pages, furo theme).

Built in strict mode by ``tests/test_docs.py`` (``sphinx-build -W -n``): a broken link, a page
outside the table of contents or a missing page fails the build.
"""

project = "phenoica"
author = "the phenoica developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "report_caption.rst", "conf.py"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
html_title = "phenoica"
suppress_warnings = []
