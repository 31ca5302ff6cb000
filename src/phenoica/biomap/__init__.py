"""From profiles to a map of biology: guide and gene profiles, gene-gene similarity, nearest
neighbours, guide consistency and known-relationship recall (the EFAAR protocol).

- **Aggregation** (:func:`aggregate_profiles`): a guide's profile is the mean of its rows (the
  profile table's images or wells), a gene's the mean of its guides' profiles. Optionally each
  batch is first centred on the mean of its own control rows. Streamed in row batches.
- **The map** (:func:`map_genes`): the genes called active by the hit calls (gene q-value below
  the threshold, ``phenoica.hits._calls``) by default, or all perturbed genes.
- **Similarity** is the cosine between unit-normalized profiles, computed in row blocks of
  ``block_rows`` genes against all genes, so memory holds one (block x genes) slab, never the
  (genes x genes) matrix: :func:`nearest_neighbors` (top k per gene, with the neighbour's
  q-value) and the null counts of :func:`relationship_recall` both stream over the blocks.
- **Recall** (:func:`relationship_recall`, EFAAR's ``known_relationship_benchmark``): the null
  is every pairwise cosine between the map's genes (upper triangle); an annotated pair is
  recalled at (lo, hi) when its cosine's rank in the null puts it at or below the lo quantile
  or at or above the hi one (EFAAR's ``compute_recall``, ranks counted exactly, block by
  block). A source sharing fewer than ``min_entities`` genes with the map is skipped with the
  counts recorded. Expected recall under no structure: ``lo + 1 - hi``.
- **Consistency** (:func:`guide_consistency`, EFAAR's perturbation consistency): the mean
  pairwise cosine between a gene's guide profiles, against a null of the same statistic over
  sets of as many guides drawn from different genes; ``p = (1 + #null >= x) / (1 + n_null)``.
  A gene with one guide gets no score, with the reason recorded.

Every random draw takes its seed from ``phenoica.utils.derive_seed``.

Modules: :mod:`._aggregate`, :mod:`._gene_similarity`, :mod:`._recall`, :mod:`._consistency`,
:mod:`._gene_map` (the biomap job; its annotation pairs are read by
:mod:`phenoica.screen._annotations`), :mod:`._batch_metrics` (ASW-batch, iLISI, batch classifier)
and :mod:`._options` (``ProfileOptions``, ``GeneMapOptions``, ``BatchMetricsOptions``: what the
``biomap_profiles``, ``biomap`` and ``batch_metrics`` jobs read).
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_aggregate": ["aggregate_profiles", "profile_files"],
        "_batch_metrics": ["batch_classifier", "batch_metrics", "batch_metrics_files", "well_profile_table"],
        "_gene_map": ["MAP_TABLES", "MapFiles", "MapInputs", "TRUTH_SOURCE", "gene_map", "gene_map_files"],
        "_gene_similarity": ["nearest_neighbors", "similarity_matrix", "unit_rows"],
        "_options": ["BatchMetricsOptions", "GeneMapOptions", "ProfileOptions"],
        "_recall": ["relationship_recall"],
    },
)
