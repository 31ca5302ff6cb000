# The face of phenoica.report for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._channels import channel_styles as channel_styles
from ._gallery import select_sites as select_sites
from ._gallery import write_gallery as write_gallery
from ._gene_maps import heatmap_figure as heatmap_figure
from ._inputs import ReportInputs as ReportInputs
from ._inputs import read_biomap as read_biomap
from ._inputs import read_inputs as read_inputs
from ._interactive import ASSETS as ASSETS
from ._interactive import PAGE as PAGE
from ._interactive import PageInputs as PageInputs
from ._interactive import write_interactive as write_interactive
from ._options import ReportOptions as ReportOptions
from ._render import Block as Block
from ._render import Figure as Figure
from ._render import Links as Links
from ._render import Page as Page
from ._render import PageSection as PageSection
from ._render import Table as Table
from ._render import read_verdict as read_verdict
from ._render import save_figure as save_figure
from ._render import write_page as write_page
from ._render import write_verdict as write_verdict
from ._sections import ReportLayout as ReportLayout
from ._sections import Section as Section
from ._truth_stats import shifted_factors as shifted_factors
from ._write import SECTIONS as SECTIONS
from ._write import write_report as write_report

__all__ = [
    "ASSETS",
    "Block",
    "channel_styles",
    "Figure",
    "heatmap_figure",
    "Links",
    "PAGE",
    "Page",
    "PageInputs",
    "PageSection",
    "read_biomap",
    "read_inputs",
    "read_verdict",
    "ReportInputs",
    "ReportLayout",
    "ReportOptions",
    "save_figure",
    "Section",
    "SECTIONS",
    "select_sites",
    "shifted_factors",
    "Table",
    "write_gallery",
    "write_interactive",
    "write_page",
    "write_report",
    "write_verdict",
]
