"""The atlas: the pool's geometry, on numpy arrays (it never imports torch).

geometry.py     distances, agreement on shared queries, nearest LLMs, distance-disagreement
                correlations and the k-th neighbour agreement curve
clusters.py     hierarchical (scipy) and k-means (scikit-learn) clusters, adjusted Rand index
projection.py   2-D maps (PCA, t-SNE) and the share of true neighbours they keep
portfolio.py    k-center, k-medoids, greedy coverage under a budget; routing among a portfolio
proxy.py        predicted agreement, proxy retention (nearest by embedding vs next best)
fingerprint.py  which known LLM is behind an endpoint on new queries: per-task likelihood and
                embedding distance, weight and threshold from the pool's data
agreement.py    the same on queries the known LLMs were scored on: agreement with their scores
identification.py  `locus identify` over a workspace: picks one of the two, reads the probe
search.py       capability search: the real LLMs nearest to a profile of per-task rates
plots.py        PNG pictures (dendrogram, map, portfolio curve)
html.py         the self-contained interactive atlas page
pool_atlas.py   WorkspaceAtlas: one workspace's pool as arrays, every command a method
page.py         what the atlas page shows: the payload of html.py
probe_file.py   an unknown endpoint's scored answers, read from a file, as evidence
"""

from locus.atlas.clusters import Clustering, family_agreement, hierarchical, kmeans
from locus.atlas.fingerprint import choose_threshold, choose_weight, draw_fingerprints, identify
from locus.atlas.geometry import agreement_matrix, distance_matrix, geometry_report, nearest
from locus.atlas.portfolio import budget_cover, k_center, k_medoids, portfolio_accuracy
from locus.atlas.projection import neighbours_kept, project
from locus.atlas.proxy import predicted_agreement, proxy_retention
from locus.atlas.search import capability_recall, synthesise_evidence

__all__ = [
    "Clustering",
    "agreement_matrix",
    "budget_cover",
    "capability_recall",
    "choose_threshold",
    "choose_weight",
    "distance_matrix",
    "draw_fingerprints",
    "family_agreement",
    "geometry_report",
    "hierarchical",
    "identify",
    "k_center",
    "k_medoids",
    "kmeans",
    "nearest",
    "neighbours_kept",
    "portfolio_accuracy",
    "predicted_agreement",
    "project",
    "proxy_retention",
    "synthesise_evidence",
]
