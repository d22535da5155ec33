"""Asking a judge for a verdict: the judge cache, parse attempts, the repair request, and the record.

Every HTTP exchange (each retry, each parse attempt, the repair) becomes one ``GraderCalled`` event,
numbered by ``attempt_number`` in the order sent, so an audit sees exactly what was asked and answered.
The cache key is the digest of (rendered messages, model, parameters), and for the second and third
parse attempts of the same messages also the attempt's number; the repair request is keyed by its own
messages. Each attempt's reply is cached, a reply that did not parse too, so an unchanged replay walks
the same attempts from the cache (a verdict that needed retries or the repair, or never got valid JSON,
is reproduced with no request). A hit reuses the recorded reply without any network call and is itself
recorded (``cache_hit``, ``reused_from``). A call that got no answer (transport error, timeout) is not
cached: the replay asks again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.grading.graders.base import GradingContext
from evalstore.replay.grading.judge.client import Exchange, JudgeClient
from evalstore.replay.grading.judge.modes import ModeResult
from evalstore.replay.grading.judge.parsing import JudgeParseError
from evalstore.replay.grading.judge.targets import ResolvedJudge
from evalstore.store.codec import canonical_json, digest_json
from evalstore.store.errors import BlobNotFound
from evalstore.store.events import GraderCalled

PARSE_ATTEMPTS = 3
EVIDENCE_REPLY_CHARS = 4000

REPAIR_PROMPT = """\
The following evaluation response has useful grading content but invalid JSON structure.
Repair it to satisfy the schema in the system prompt.
Preserve the evaluation meaning, do not re-grade the answer, and return only a single JSON object.

Validation error:
{error}

Invalid response:
{reply}"""
"""AgentV 4.42.4's ``buildStructureRepairPrompt``; the validation error is evalstore's own words (AgentV's
are zod's)."""

Parser = Callable[[str | None], ModeResult]


def cache_key(
    messages: list[dict[str, Any]],
    model: str,
    parameters: dict[str, Any],
    parse_attempt: int = 1,
    provider: str | None = None,
    endpoint: str | None = None,
) -> str:
    """The judge cache key of one request: attempt 1 keeps the key evalstore always used, so replies
    recorded before attempts were keyed are still found; so does a Chat Completions judge (``provider``
    None), where an Anthropic or Gemini judge's request, another for the same messages, names its provider.
    ``endpoint`` (``ResolvedJudge.cache_endpoint``) is named by every request recorded since the endpoint
    was keyed; without it, the key replies recorded before then were found by (:meth:`JudgeCall._ask`)."""
    keyed: dict[str, Any] = {"messages": messages, "model": model, "parameters": parameters}
    if parse_attempt > 1:
        keyed["parse_attempt"] = parse_attempt
    if provider is not None:
        keyed["provider"] = provider
    if endpoint is not None:
        keyed["endpoint"] = endpoint
    return digest_json(keyed)


@dataclass
class JudgeOutcome:
    result: ModeResult | None
    """The scored verdict, or None when every attempt failed."""
    call_event_ids: list[str] = field(default_factory=list)
    cache_hit: bool = False
    error: str | None = None
    """Why no verdict came back: the last parse or transport error."""
    last_reply: str | None = None
    parse_failure: bool = False
    """True when the judge answered but never in the required shape (vs. a failed call)."""
    usage: dict[str, Any] | None = None
    """The token usage of the reply the result came from, as recorded (a reused reply's, from its record)."""


class JudgeCall:
    """One grader's conversation with its judge, recorded through ``ctx.recorder``."""

    def __init__(
        self,
        ctx: GradingContext,
        grader: str,
        judge: ResolvedJudge,
        client: JudgeClient,
        *,
        cache_only: bool = False,
        grader_type: str = "llm-grader",
        batchable: bool = True,
    ) -> None:
        self.grader_type = grader_type
        """What the calls are recorded as coming from (a code grader's target proxy records its own)."""
        self.cache_only = cache_only
        self.batch = ctx.options.batch if batchable else None
        """``replay --batch``'s requests and replies (``judge/batches.py``); None: every request is sent. A
        code grader's target proxy is not batchable: its process waits for each answer."""
        """Reuse a recorded reply or give up: the judge cannot be called (no key), but a replay can
        still reproduce what was recorded."""
        self.ctx = ctx
        self.grader = grader
        self.judge = judge
        self.client = client
        self.outcome = JudgeOutcome(None)
        self._attempt_number = 0
        self._hits = 0
        self._sent = False

    def run(self, messages: list[dict[str, Any]], parse: Parser) -> JudgeOutcome:
        self._converse(messages, parse)
        # From the cache only when no request was sent: every attempt it took was a recorded one.
        self.outcome.cache_hit = self._hits > 0 and not self._sent
        return self.outcome

    def _converse(self, messages: list[dict[str, Any]], parse: Parser) -> None:
        repairable: str | None = None
        for parse_attempt in range(1, PARSE_ATTEMPTS + 1):
            reply = self._ask(messages, parse_attempt, parse)
            if reply is None:  # no answer (the call failed after its retries, or cache only): stop here
                return
            if self.outcome.result is not None:
                return
            if reply.strip():
                repairable = reply
        if repairable is not None:
            repair = [
                messages[0],
                {"role": "user", "content": REPAIR_PROMPT.format(error=self.outcome.error, reply=repairable)},
            ]
            self._ask(repair, 1, parse)

    def _ask(self, messages: list[dict[str, Any]], parse_attempt: int, parse: Parser) -> str | None:
        """One parse attempt: the recorded reply to this request and attempt, else the judge's."""
        judge = self.judge
        key = cache_key(
            messages, judge.model, judge.parameters, parse_attempt, judge.cache_provider, judge.cache_endpoint
        )
        if not self.ctx.options.no_cache:
            # A reply recorded before the endpoint was keyed names none: it is found as it was then, for this
            # model at any endpoint (what a store written by an earlier version holds), and recorded again
            # under this endpoint's key.
            reply = self._from_cache(messages, key, parse_attempt, parse, lookup=key)
            if reply is None:  # the older key is hashed only when this one misses
                legacy = cache_key(messages, judge.model, judge.parameters, parse_attempt, judge.cache_provider)
                reply = self._from_cache(messages, key, parse_attempt, parse, lookup=legacy)
            if reply is not None:
                return reply
        if self.batch is not None and self.batch.collecting:
            # Wanted even without a key (``cache_only``): the replay then refuses before it begins, instead
            # of grading every such request as an execution error (``JudgeBatches.check_callable``).
            self.batch.want(key, self.judge, messages)
            self.outcome.error = "waiting for the judge batch"
            return None
        if self.cache_only and (self.batch is None or self.batch.answer(key) is None):
            return None  # a batch's reply needs no key here: the process that submitted it had one
        return self._send(messages, key, parse_attempt, parse)

    # -- internals ----------------------------------------------------------------------------

    def _from_cache(
        self, messages: list[dict[str, Any]], key: str, parse_attempt: int, parse: Parser, *, lookup: str
    ) -> str | None:
        """The reply recorded under ``lookup``, parsed and recorded as a hit under ``key``; None on a miss."""
        recorder = self.ctx.recorder
        found = recorder.find_judge_call(lookup)
        if found is None:
            return None
        reused_from, earlier = found
        if earlier.reply_sha256 is None:
            return None
        start = time.perf_counter()
        try:
            reply = recorder.get_blob(earlier.reply_sha256).decode("utf-8")
        except (BlobNotFound, UnicodeDecodeError):
            return None  # an unusable recorded reply is no reason to fail: ask the judge again
        error: str | None = None
        try:
            result: ModeResult | None = parse(reply)
        except JudgeParseError as exc:
            if earlier.outcome == "ok":
                return None  # it parsed when recorded: ask again rather than guess why it no longer does
            result, error = None, str(exc)
        self._record(
            messages,
            key,
            reply_sha256=earlier.reply_sha256,
            outcome="ok" if result is not None else "parse_error",
            latency_ms=round((time.perf_counter() - start) * 1000.0, 3),
            error=error,
            cache_hit=True,
            reused_from=reused_from,
            parse_attempt=parse_attempt,
        )
        self.outcome.last_reply = reply
        self._hits += 1
        if result is not None:
            self.outcome.result = result
            self.outcome.error = None
            self.outcome.parse_failure = False
            self.outcome.usage = earlier.usage
        else:
            self.outcome.error = error
            self.outcome.parse_failure = True
        return reply

    def _send(self, messages: list[dict[str, Any]], key: str, parse_attempt: int, parse: Parser) -> str | None:
        """Send one request (with its transport retries); returns the reply text, None if the call failed.
        Under ``replay --batch`` a request the batch answered takes the batch's reply, recorded as the
        request would have been (the collecting pass noted it for the batch in :meth:`_ask`)."""
        batch_id: str | None = None
        answered = self.batch.answer(key) if self.batch is not None else None
        self._sent = True
        if answered is not None:
            exchanges, batch_id = [answered[0]], answered[1]
        else:
            self.ctx.waiting()
            exchanges = self.client.complete(self.judge, messages)
        for exchange in exchanges[:-1]:
            self._record_exchange(messages, key, parse_attempt, exchange, exchange.outcome, exchange.error)
        final = exchanges[-1]
        if final.outcome != "ok":
            self._record_exchange(messages, key, parse_attempt, final, final.outcome, final.error)
            self.outcome.error = final.error
            self.outcome.parse_failure = False
            if final.body:
                self.outcome.last_reply = final.body.decode("utf-8", errors="replace")
            return None
        reply = final.content if final.content is not None else (final.body or b"").decode("utf-8", errors="replace")
        self.outcome.last_reply = reply
        try:
            if final.content is None:
                raise JudgeParseError("the judge response is not a Chat Completions reply with message content")
            result = parse(final.content)
        except JudgeParseError as exc:
            self.outcome.error = str(exc)
            self.outcome.parse_failure = True
            self._record_exchange(messages, key, parse_attempt, final, "parse_error", str(exc), batch_id)
            return reply
        self._record_exchange(messages, key, parse_attempt, final, "ok", None, batch_id)
        self.outcome.result = result
        self.outcome.error = None
        self.outcome.parse_failure = False
        self.outcome.usage = final.usage
        return reply

    def _record_exchange(
        self,
        messages: list[dict[str, Any]],
        key: str,
        parse_attempt: int,
        exchange: Exchange,
        outcome: str,
        error: str | None,
        batch_id: str | None = None,
    ) -> None:
        reply: bytes | None
        if exchange.content is not None:
            reply = exchange.content.encode("utf-8")
        else:
            reply = exchange.body
        self._record(
            messages,
            key,
            reply_sha256=self.ctx.recorder.put_blob(reply) if reply is not None else None,
            outcome=outcome,
            latency_ms=exchange.latency_ms,
            usage=exchange.usage,
            error=error,
            parse_attempt=parse_attempt,
            batch_id=batch_id,
        )

    def _record(
        self,
        messages: list[dict[str, Any]],
        key: str,
        *,
        reply_sha256: str | None,
        outcome: str,
        latency_ms: float,
        usage: dict[str, Any] | None = None,
        error: str | None = None,
        cache_hit: bool = False,
        reused_from: str | None = None,
        parse_attempt: int | None = None,
        batch_id: str | None = None,
    ) -> None:
        ctx = self.ctx
        self._attempt_number += 1
        event = GraderCalled(
            test_id=ctx.test.id,
            target=ctx.target,
            attempt=ctx.attempt,
            grader=self.grader,
            grader_type=self.grader_type,
            call="judge",
            request_sha256=ctx.recorder.put_blob(canonical_json(messages).encode("utf-8")),
            reply_sha256=reply_sha256,
            model=self.judge.model,
            parameters=self.judge.parameters,
            cache_key=key,
            cache_hit=cache_hit,
            reused_from=reused_from,
            usage=usage,
            latency_ms=latency_ms,
            attempt_number=self._attempt_number,
            outcome=outcome,  # type: ignore[arg-type]
            error=error,
            parse_attempt=parse_attempt,
            batch_id=batch_id,
        )
        self.outcome.call_event_ids.append(ctx.recorder.record(event))
