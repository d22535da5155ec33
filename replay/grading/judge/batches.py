"""``replay --batch``: the judge requests a replay would send, sent through the providers' batch APIs.

A replay with ``--batch`` grades twice. First a collecting pass, which writes nothing: its LLM graders
look their prompts up in the judge cache as always, and every request that misses is noted
(:meth:`JudgeBatches.want`) instead of sent. Those requests go to the batch API of their judge target's
provider, one batch per judge and model, split where they are more than the provider takes in one batch
(``batch_apis.py``: its ``max_requests`` and ``max_bytes``). Each batch is recorded twice: a
``judge_batch_intended`` event with a new intent id before it is submitted (the batch carries the id), and a
``judge_batch_submitted`` event with the provider's batch id before anything waits on it. So a replay
stopped while a batch runs is finished by ``--resume`` from that batch, and one stopped between submitting
and recording the batch finds it by its intent (:meth:`BatchAPI.find`); nothing is submitted twice. Then
the replay grades as it
always does, and a request the batch answered takes its reply from there (:meth:`JudgeBatches.answer`)
instead of the network: it is recorded as the ``grader_called`` a direct request records (with the batch's
id), enters the judge cache the same way, and gives the same verdict. A request the batch did not answer
(an item that failed or expired, a parse attempt after the first, a repair) is sent directly.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalstore.replay.errors import JudgeConfigError, ReplayError
from evalstore.replay.grading.judge.batch_apis import BatchAPI, batch_api
from evalstore.replay.grading.judge.client import Exchange
from evalstore.replay.grading.judge.targets import ResolvedJudge
from evalstore.store.events import JudgeBatchIntended, JudgeBatchSubmitted

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.pool import JudgePool

POLL_ENV = "EVALSTORE_JUDGE_BATCH_POLL"
DEFAULT_POLL_SECONDS = 30.0
"""How often a batch is asked how it is doing (a provider's batch takes minutes to hours)."""


class JudgeBatches:
    """The requests a replay's collecting pass wanted, then the replies its batches gave, by cache key.

    Sent to a remote executor's workers with the grading options: only the replies travel (the wanted
    requests hold resolved judges, whose headers hold keys)."""

    def __init__(self) -> None:
        self.collecting = True
        self._wanted: dict[str, tuple[ResolvedJudge, list[dict[str, Any]]]] = {}
        self._answers: dict[str, tuple[Exchange, str]] = {}
        self._lock = threading.Lock()

    def want(self, key: str, judge: ResolvedJudge, messages: list[dict[str, Any]]) -> None:
        with self._lock:
            self._wanted.setdefault(key, (judge, messages))

    def check_callable(self, pool: JudgePool) -> None:
        """Refuse (``JudgeConfigError``) when a judge the wanted requests need cannot be called: its key is
        unset, so no batch of them could be submitted (a request that missed the cache was wanted even so,
        resolved without the key, to be refused here). Asked as a batch of them would be (``_api``)."""
        needed: dict[tuple[str, str], int] = {}
        for judge, _ in self._wanted.values():
            needed[(judge.target, judge.model)] = needed.get((judge.target, judge.model), 0) + 1
        for (target, model), count in needed.items():
            try:
                pool.resolve(pool.named(target).with_model(model))
            except JudgeConfigError as exc:
                raise JudgeConfigError(
                    f"--batch: {count} judge prompt{'s' if count != 1 else ''} the judge cache does not hold "
                    f"cannot be sent: {exc}; nothing was written (without --batch a replay reuses the recorded "
                    "replies and records the others as execution errors)"
                ) from None

    def wants(self, key: str) -> bool:
        return key in self._wanted

    def answer(self, key: str) -> tuple[Exchange, str] | None:
        """The batch's reply to this request and the batch's id, if a batch answered it."""
        return self._answers.get(key)

    def answered(self, key: str, exchange: Exchange, batch_id: str) -> None:
        with self._lock:
            self._answers[key] = (exchange, batch_id)

    def unanswered(self) -> dict[str, tuple[ResolvedJudge, list[dict[str, Any]]]]:
        with self._lock:
            return {k: v for k, v in self._wanted.items() if k not in self._answers}

    def __getstate__(self) -> dict[str, Any]:
        return {"collecting": self.collecting, "_answers": dict(self._answers)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _wanted={}, _lock=threading.Lock())


@dataclass
class BatchSummary:
    batches: list[str] = field(default_factory=list)
    """Every batch this replay used: found recorded (a resume) or submitted now."""
    submitted: list[str] = field(default_factory=list)
    """The batches submitted by this process."""
    answered: int = 0
    """Requests a batch answered."""
    unanswered: dict[str, str] = field(default_factory=dict)
    """Requests a batch took but gave no reply to (failed, expired), by cache key, with why: sent directly."""


Note = Callable[[str], None]


def poll_seconds() -> float:
    value = os.environ.get(POLL_ENV)
    try:
        return max(0.01, float(value)) if value else DEFAULT_POLL_SECONDS
    except ValueError:
        raise ReplayError(f"{POLL_ENV}={value!r}: expected a number of seconds") from None


def settle(
    batches: JudgeBatches,
    pool: JudgePool,
    recorded: Iterable[JudgeBatchIntended | JudgeBatchSubmitted],
    record: Callable[[JudgeBatchIntended | JudgeBatchSubmitted], object],
    *,
    note: Note | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchSummary:
    """Get every wanted request answered by a batch: the batches already ``recorded`` first (a resumed
    replay's, and those its intents find), then new batches, per judge and model, for what is still
    unanswered, each intent and each submission recorded through ``record`` (the intent before the batch is
    submitted, the submission before it is waited on). Returns when every batch has ended."""
    from evalstore.replay.bounded_http import deadline_client

    summary = BatchSummary()
    say = note or (lambda _: None)
    with deadline_client() as http:
        recorded = list(recorded)
        fulfilled = {e.intent_id for e in recorded if isinstance(e, JudgeBatchSubmitted) and e.intent_id}
        open_batches: list[tuple[BatchAPI, str, int]] = []
        for event in recorded:
            api = _api(pool, http, event.judge_target, event.model)
            if isinstance(event, JudgeBatchSubmitted):
                open_batches.append((api, event.batch_id, event.requests))
                summary.batches.append(event.batch_id)
                say(f"judge batch {event.batch_id} ({event.requests} prompts) was submitted before: waiting for it")
            elif event.intent_id not in fulfilled:
                open_batches += _found(api, event, record, summary, say)
        _wait(batches, open_batches, summary, say, sleep)
        groups: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = {}
        judges: dict[tuple[str, str, str], ResolvedJudge] = {}
        for key, (judge, messages) in batches.unanswered().items():
            group = (judge.target, judge.model, json.dumps(judge.parameters, sort_keys=True))
            groups.setdefault(group, {})[key] = messages
            judges[group] = judge
        open_batches = []
        for group, wanted in groups.items():
            judge = judges[group]
            api = _api(pool, http, judge.target, judge.model)
            chunks, too_large = split(api, wanted)
            summary.unanswered.update(too_large)
            for requests in chunks:
                intent = JudgeBatchIntended(
                    intent_id=uuid.uuid4().hex,
                    provider=api.provider,
                    judge_target=judge.target,
                    model=judge.model,
                    requests=len(requests),
                    intended_at=time.time(),
                )
                record(intent)
                done = api.submit(requests, intent.intent_id)
                record(
                    JudgeBatchSubmitted(
                        batch_id=done.batch_id,
                        provider=api.provider,
                        judge_target=judge.target,
                        model=judge.model,
                        requests=len(requests),
                        input_file_id=done.input_file_id,
                        intent_id=intent.intent_id,
                    )
                )
                summary.batches.append(done.batch_id)
                summary.submitted.append(done.batch_id)
                open_batches.append((api, done.batch_id, len(requests)))
                say(f"judge batch {done.batch_id} submitted: {len(requests)} prompts to {judge.target} ({judge.model})")
        _wait(batches, open_batches, summary, say, sleep)
    return summary


def split(
    api: BatchAPI, requests: dict[str, list[dict[str, Any]]]
) -> tuple[list[dict[str, list[dict[str, Any]]]], dict[str, str]]:
    """``requests`` in batches of at most ``api.max_requests`` requests and ``api.max_bytes`` bytes, in
    order; and, apart, the requests larger than a whole batch may be, with why (they are sent directly)."""
    chunks: list[dict[str, list[dict[str, Any]]]] = []
    too_large: dict[str, str] = {}
    chunk: dict[str, list[dict[str, Any]]] = {}
    used = 0
    for key, messages in requests.items():
        size = api.size(key, messages)
        if size > api.max_bytes:
            too_large[key] = f"{size} bytes: more than one {api.provider} batch holds ({api.max_bytes})"
            continue
        if chunk and (len(chunk) >= api.max_requests or used + size > api.max_bytes):
            chunks.append(chunk)
            chunk, used = {}, 0
        chunk[key] = messages
        used += size
    if chunk:
        chunks.append(chunk)
    return chunks, too_large


def _found(
    api: BatchAPI,
    intent: JudgeBatchIntended,
    record: Callable[[JudgeBatchSubmitted], object],
    summary: BatchSummary,
    say: Note,
) -> list[tuple[BatchAPI, str, int]]:
    """The batch a recorded intent was submitted as, when its replay stopped before recording it: recorded
    now where the provider marks batches with their intent (then it is surely this replay's). Anthropic
    marks none: every batch of that size created since is waited on unrecorded, for the replies whose
    ``custom_id`` (a request's cache key) is one of ours; a resume after that looks for them again."""
    found = api.find(intent.intent_id, intent.requests, intent.intended_at)
    if not found:
        say(f"judge batch intent {intent.intent_id}: no batch was submitted for it; its prompts are submitted now")
        return []
    if api.marks:
        [batch_id] = found
        record(
            JudgeBatchSubmitted(
                batch_id=batch_id,
                provider=intent.provider,
                judge_target=intent.judge_target,
                model=intent.model,
                requests=intent.requests,
                intent_id=intent.intent_id,
            )
        )
    for batch_id in found:
        summary.batches.append(batch_id)
        say(f"judge batch {batch_id} ({intent.requests} prompts) was submitted before it was recorded: waiting for it")
    return [(api, batch_id, intent.requests) for batch_id in found]


def _api(pool: JudgePool, http: Any, target_name: str, model: str) -> BatchAPI:
    target = pool.named(target_name).with_model(model)
    return batch_api(target, pool.resolve(target), pool.env, http)


def _wait(
    batches: JudgeBatches,
    open_batches: list[tuple[BatchAPI, str, int]],
    summary: BatchSummary,
    say: Note,
    sleep: Callable[[float], None],
) -> None:
    interval = poll_seconds()
    waiting = list(open_batches)
    while waiting:
        still = []
        for api, batch_id, submitted in waiting:
            status = api.status(batch_id)
            if status.state == "in_progress":
                still.append((api, batch_id, submitted))
                continue
            results = api.results(batch_id)
            got = 0
            for key, result in results.items():
                if not batches.wants(key):  # another replay's request in a batch found by its size
                    continue
                if isinstance(result, Exchange):
                    batches.answered(key, result, batch_id)
                    got += 1
                else:
                    summary.unanswered[key] = result
            summary.answered += got
            # Of the prompts submitted: a batch that failed or was cancelled has no results file to count.
            ended = f"judge batch {batch_id} {status.state}: {got} of {submitted} prompts answered"
            say(ended + (f" ({status.detail})" if status.detail else ""))
        waiting = still
        if waiting:
            sleep(interval)
    for key in list(summary.unanswered):
        if batches.answer(key) is not None:  # answered by another batch after all
            del summary.unanswered[key]
