"""Canary probes: has an endpoint changed behind its name? No reference answers needed.

A fixed set of the workspace's training queries (`canary_probes`: drawn once, seeded, across
its tasks, and kept in the store) is asked of each LLM's endpoint at temperature 0. The first
answers are its baseline (`record_canaries`); each later check (`check_canaries`, by hand,
from cron, or on the gateway's schedule: `ServerSettings.canary_every_s`) asks again and
compares, probe by probe: an answer is the same where its normalised text (lower case, spaces
collapsed) equals the baseline's or their `difflib` ratio, word by word, is at least
`SAME_RATIO`. The alarm is raised where at least `CHANGED_ALARM` of the probes answered
changed. The new answers are also set against every other LLM's baseline: the LLM whose
answers they match on most probes, where that beats the LLM's own baseline, is named ("now
answers like mini-cheap"), which places a silent swap in the pool.

The outcome test (`locus.routing.drift`) needs traffic and grades; the canary needs neither,
and costs `len(probes)` requests per LLM per check.

    >>> same_answer("The answer is (B).", "the answer is  (b).")
    True
    >>> same_answer("The answer is (B).", "I think it is (D), because ...")
    False
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from locus.data.llm_catalog import Endpoint
from locus.data.query_identity import text_hash
from locus.errors import LocusInputError
from locus.pipeline.endpoint import EndpointAnswer, ask_all, check_endpoint
from locus.pipeline.probes import choose_probes
from locus.store import Store

__all__ = [
    "CANARY_PROBES",
    "CHANGED_ALARM",
    "SAME_RATIO",
    "CanaryCheck",
    "canary_probes",
    "check_canaries",
    "compare",
    "record_canaries",
    "same_answer",
]

CANARY_PROBES = 20  # probes per check: 20 requests per LLM
SAME_RATIO = 0.8  # difflib ratio at or above which two answers are the same answer
CHANGED_ALARM = 0.5  # the share of changed answers that raises the alarm
_META_KEY = "canary_probes"
_SPACES = re.compile(r"\s+")

Ask = Callable[[Endpoint, str | None, list[tuple[str, list[dict[str, str]]]]], dict[str, Any]]


def _normal(text: str) -> str:
    return _SPACES.sub(" ", text.strip().lower())


def same_answer(a: str, b: str) -> bool:
    """Whether two answers to one probe are the same answer (`SAME_RATIO`)."""
    x, y = _normal(a), _normal(b)
    if x == y:
        return True
    # word by word: a long answer is a few hundred words, and a changed word is one edit
    matcher = difflib.SequenceMatcher(None, x.split(" "), y.split(" "), autojunk=False)
    return matcher.real_quick_ratio() >= SAME_RATIO and matcher.ratio() >= SAME_RATIO


@dataclass(frozen=True)
class CanaryCheck:
    """One LLM's check against its baseline.

    Attributes:
        llm_id: the LLM.
        probes: the probes both rounds answered.
        changed: how many of them it answered differently.
        alarm: `changed / probes >= CHANGED_ALARM`.
        answers_like: the LLM whose baseline the new answers match on the most probes, where
            that beats its own baseline (None: none does).
        like_share: the share of probes on which they match it (None without `answers_like`).
        failed: probes the endpoint did not answer this time.
        error: why it could not be asked at all (unreachable, its key refused, no endpoint
            in the catalog any more), None where it was.
    """

    llm_id: str
    probes: int
    changed: int
    alarm: bool
    answers_like: str | None = None
    like_share: float | None = None
    failed: int = 0
    error: str | None = None

    @property
    def changed_share(self) -> float:
        return self.changed / self.probes if self.probes else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_id": self.llm_id, "probes": self.probes, "changed": self.changed,
            "changed_share": self.changed_share, "alarm": self.alarm,
            "answers_like": self.answers_like, "like_share": self.like_share,
            "failed": self.failed, "error": self.error,
        }  # fmt: skip

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.llm_id}: not checked ({self.error})"
        said = f"{self.llm_id}: {self.changed} of {self.probes} canary answers changed" + (
            " (ALARM)" if self.alarm else ""
        )
        if self.answers_like is not None and self.like_share is not None:
            said += f"; now answers like {self.answers_like} ({self.like_share:.0%} of probes)"
        if self.failed:
            said += f"; {self.failed} probes unanswered"
        return said


def compare(
    llm_id: str,
    latest: Mapping[str, str],
    baselines: Mapping[str, Mapping[str, str]],
    failed: int = 0,
) -> CanaryCheck:
    """`llm_id`'s `latest` answers {text_hash: answer} against its baseline in `baselines`
    ({llm_id: {text_hash: answer}}), and against the other LLMs' baselines.

    Raises:
        LocusInputError: `llm_id` has no baseline.
    """
    own = baselines.get(llm_id)
    if not own:
        raise LocusInputError(
            f"canary: {llm_id!r} has no baseline answers; run `locus canary record {llm_id}`"
        )
    shared = [h for h in latest if h in own]
    changed = sum(not same_answer(latest[h], own[h]) for h in shared)
    own_share = 1 - changed / len(shared) if shared else 0.0
    like, like_share = None, None
    for other, answers in sorted(baselines.items()):
        common = [h for h in latest if h in answers]
        if other == llm_id or len(common) < max(1, len(shared) // 2):
            continue
        share = sum(same_answer(latest[h], answers[h]) for h in common) / len(common)
        if share > own_share and (like_share is None or share > like_share):
            like, like_share = other, share
    alarm = bool(shared) and changed / len(shared) >= CHANGED_ALARM
    return CanaryCheck(llm_id, len(shared), changed, alarm, like, like_share, failed)


def canary_probes(store: Store, n: int = CANARY_PROBES, seed: int = 0) -> dict[str, str]:
    """{text_hash: text} of the workspace's canary probes: kept in the store once drawn, so
    every check asks the same; else `n` training queries in the task-stratified order
    `locus probes` draws (`choose_probes`, strategy "stratified"), so that a change in one
    kind of answer shows.

    Raises:
        LocusInputError: the workspace has no encoded queries to draw from.
    """
    kept = store.get_meta(_META_KEY)
    if kept:
        wanted = json.loads(kept)
        found = store.query_texts(wanted)
        return {h: found[h][0] for h in wanted if h in found}
    drawn = choose_probes(store, n, strategy="stratified", seed=seed)
    probes = {text_hash(p["query_text"]): p["query_text"] for p in drawn if p["query_text"]}
    if not probes:
        raise LocusInputError("canary: the workspace has no query texts to probe with")
    store.set_meta(_META_KEY, json.dumps(list(probes)))
    return probes


def _endpoints(
    store: Store, llm_ids: Sequence[str] | None, *, strict: bool = True
) -> dict[str, Endpoint | None]:
    catalog = store.llm_metadata()
    found = {
        llm: endpoint
        for llm, meta in sorted(catalog.items())
        if (endpoint := Endpoint.from_json(meta.get("endpoint"))) is not None
    }
    if llm_ids is None:
        if not found:
            raise LocusInputError(
                "canary: no LLM of the workspace has an endpoint; add them with `locus import "
                "llms` (base_url, upstream_model, api_key_env)"
            )
        return dict(found)
    missing = [llm for llm in llm_ids if llm not in found]
    if missing and strict:
        raise LocusInputError(
            f"canary: no endpoint for {', '.join(missing)}; add it with `locus import llms`"
        )
    return {llm: found.get(llm) for llm in llm_ids}


def _api_key(endpoint: Endpoint) -> str | None:
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise LocusInputError(
            f"canary: {endpoint.api_key_env} is not set; export the API key of "
            f"{endpoint.base_url} in it"
        )
    return key


@dataclass(frozen=True)
class _Asked:
    answers: dict[str, tuple[str, str | None]]  # text_hash -> (answer, upstream model)
    failed: int = 0  # probes unanswered
    error: str | None = None  # why the LLM could not be asked at all


def _ask(
    store: Store,
    llm_ids: Sequence[str] | None,
    probes: Mapping[str, str],
    *,
    strict: bool = True,
    **options: Any,
) -> dict[str, _Asked]:
    """Each LLM's answers to `probes`; one that cannot be asked (unreachable, its key
    refused or unset, no endpoint where not `strict`) is said so, and the others are asked."""
    out = {}
    prompts = [(h, [{"role": "user", "content": text}]) for h, text in probes.items()]
    for llm, endpoint in _endpoints(store, llm_ids, strict=strict).items():
        if endpoint is None:
            out[llm] = _Asked({}, error="no endpoint in the catalog (locus import llms)")
            continue
        answers: dict[str, tuple[str, str | None]] = {}

        def keep(h: str, answer: EndpointAnswer, into: dict[str, Any] = answers) -> None:
            into[h] = (answer.text, answer.model)

        try:
            key = _api_key(endpoint)
            check_endpoint(endpoint, key)
            failures = ask_all(endpoint, key, prompts, keep, **options)
        except LocusInputError as error:  # EndpointError included: this LLM, not the others
            out[llm] = _Asked(answers, error=str(error))
            continue
        out[llm] = _Asked(answers, len(failures))
    return out


def record_canaries(
    store: Store,
    llm_ids: Sequence[str] | None = None,
    *,
    probes: int = CANARY_PROBES,
    **options: Any,
) -> dict[str, int | str]:
    """Ask each LLM (default: every LLM with an endpoint) the canary probes and keep the answers
    as its baseline. Returns {llm_id: answers kept, or why it could not be asked (its earlier
    baseline then kept)}. `options` go to `ask_all`."""
    asked = canary_probes(store, probes)
    found: dict[str, int | str] = {}
    for llm, got in _ask(store, llm_ids, asked, **options).items():
        if got.error is not None or not got.answers:
            found[llm] = got.error or f"none of the {len(asked)} probes answered"
            continue
        store.put_canary_answers(llm, "baseline", got.answers)
        found[llm] = len(got.answers)
    return found


def check_canaries(
    store: Store, llm_ids: Sequence[str] | None = None, **options: Any
) -> list[CanaryCheck]:
    """Ask each LLM with a baseline (default: all of them) the canary probes again, keep the
    answers as its latest, and compare them with the baselines (`compare`).

    Raises:
        LocusInputError: no baseline recorded (or none for an LLM named).
    """
    baselines = store.canary_answers("baseline")
    if not baselines:
        raise LocusInputError("canary: no baseline recorded yet; run `locus canary record`")
    wanted = sorted(baselines) if llm_ids is None else list(llm_ids)
    for llm in wanted:
        if llm not in baselines:
            raise LocusInputError(
                f"canary: {llm!r} has no baseline answers; run `locus canary record {llm}`"
            )
    asked = canary_probes(store)
    checks = []
    for llm, got in _ask(store, wanted, asked, strict=llm_ids is not None, **options).items():
        if got.error is not None:
            checks.append(CanaryCheck(llm, 0, 0, False, failed=len(asked), error=got.error))
            continue
        store.put_canary_answers(llm, "latest", got.answers)
        latest = {h: text for h, (text, _) in got.answers.items()}
        checks.append(compare(llm, latest, baselines, got.failed))
    return checks
