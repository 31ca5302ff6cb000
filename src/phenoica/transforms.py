"""The embedding variants' former home: the public names of :mod:`phenoica.variants`, kept
importable here for code written against ``phenoica.transforms``. New code imports
:mod:`phenoica.variants`."""

from phenoica.variants import *  # noqa: F401,F403
from phenoica.variants import __all__  # noqa: F401
