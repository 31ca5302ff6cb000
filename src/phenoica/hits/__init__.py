"""Hit calls: guide and gene p- and q-values from the scores and their null."""
