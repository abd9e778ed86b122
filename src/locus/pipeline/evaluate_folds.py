"""`locus evaluate --folds K`: every query of the workspace routed once, by a router fitted
without it.

One split's test queries are a tenth of the pool: on a user's own pool of a few hundred
queries, 20-40 of them, whose hit@1 has a standard error of 7-10 points and says next to
nothing (DESIGN.md, metrics). Here the workspace's queries are split in `folds` by their text
(`locus.data.splits.kfold_splits`: of the other queries, one in eight validates); each fold
fits `locus fit`'s recipe on the rest (`fit_router`: LOCUS, the stack, the guard, with the
artifact's training settings where there is one) and routes its own; the decisions of every
fold, beside the baselines chosen on that fold's training queries, are measured as one
(`Routed.joined`). Nothing is saved: the workspace and its artifacts stay as they are.

>>> result = evaluate_folds(store, folds=5)                        # doctest: +SKIP
>>> result.routing.hit_at_1, result.baselines.best_llm_per_task  # doctest: +SKIP
"""

from __future__ import annotations

from collections import Counter

from locus._progress import ProgressFactory, no_progress
from locus.artifact.layout import CONFIG_FILE, read_artifact_config
from locus.data.splits import kfold_splits
from locus.errors import LocusInputError
from locus.locus import Locus
from locus.nn.config import TrainingConfig
from locus.nn.training import ProgressCallback
from locus.pipeline.data import workspace_table
from locus.pipeline.evaluate import Routed, evaluation
from locus.pipeline.evaluation_results import Evaluation
from locus.pipeline.fit import fit_router, size_notes
from locus.pipeline.outcomes import decision_propensities
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT, artifact_path
from locus.store import Store

__all__ = ["MAX_FOLDS", "evaluate_folds"]

MAX_FOLDS = 20  # each fold is a whole fit


def evaluate_folds(
    store: Store,
    *,
    folds: int = 5,
    name: str = DEFAULT_ARTIFACT,
    seed: int = 0,
    progress: ProgressCallback | None = None,
    stages: ProgressFactory = no_progress,
) -> Evaluation:
    """hit@1/3/5, correctness and the baselines over every query of the workspace, each routed
    by `locus fit`'s recipe fitted on the other folds (`seed` draws the folds).

    The training settings are those of artifact `name` where it exists (the result's
    `artifact`), `locus fit`'s defaults otherwise (its `artifact` then ""); every LLM of the
    workspace with scored queries is fitted, an LLM onboarded since the artifact's fit as any
    other. `progress` hears each fold's training steps; `stages` opens one task per fold,
    once it is fitted.

    Raises:
        LocusInputError: `folds` outside 2..`MAX_FOLDS`, or a fold too small to fit
            (`locus.pipeline.fit.size_notes`).
    """
    if not 2 <= folds <= MAX_FOLDS:
        raise LocusInputError(f"--folds: expected 2 to {MAX_FOLDS}, found {folds}")
    folder = artifact_path(store, name)
    config, settings = TrainingConfig(), ""  # "": `locus fit`'s defaults, no artifact read
    if (folder / CONFIG_FILE).exists():
        config = TrainingConfig.from_dict(read_artifact_config(folder)["training"])
        settings = name
    data = workspace_table(store)
    table = data.table
    if len(table.text_hashes) < folds:
        raise LocusInputError(
            f"--folds {folds}: the workspace has {len(table.text_hashes)} queries with text; "
            "expected at least one per fold"
        )
    parts: list[Routed] = []
    tested: list[str] = []  # the text hashes of the joined parts' rows, in their order
    defaults: Counter[str] = Counter()
    for fold, splits in enumerate(kfold_splits(list(table.text_hashes), folds=folds, seed=seed)):
        fold_data = data.with_splits(splits)
        train, val, test = (fold_data.rows(split) for split in ("train", "val", "test"))
        if not len(test):  # a hash bucket left empty on a tiny pool: nothing to route
            continue
        size_notes(table, train, val, len(test), True)
        router = fit_router(
            Locus(config), table, data.vectors, train, val, encoder=data.encoder,
            progress=progress,
        )  # fmt: skip
        fitted = f"fitted on the other {len(train) + len(val):,}"
        with stages(f"fold {fold + 1} of {folds}: its {len(test):,} queries routed, {fitted}"):
            parts.append(Routed.of(router, table, data.vectors, test, train))
            tested += [table.text_hashes[i] for i in test]
        if router.guard is not None:
            defaults[router.guard.default] += 1
    guard = None
    if defaults:  # a guard per fold: said by the default LLMs the folds chose
        guard = {"default": " / ".join(llm for llm, _ in defaults.most_common())}
    return evaluation(
        Routed.joined(parts), list(table.llm_ids), artifact=settings, split=f"{folds}-fold",
        guard=guard, folds=folds,
        logged=decision_propensities(store, tested, list(table.llm_ids)),
    )  # fmt: skip
