"""Asking a judge for a verdict: the judge cache, parse attempts, the repair request, and the record.

Every HTTP exchange (each retry, each parse attempt, the repair) becomes one ``GraderCalled`` event,
numbered by ``attempt_number`` in the order sent, so an audit sees exactly what was asked and answered.
The cache key is the digest of (rendered messages, model, parameters); a hit reuses the recorded reply
without any network call and is itself recorded (``cache_hit``, ``reused_from``).
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
The evaluation below contains useful grading but its JSON does not fit the schema in the system prompt.
Rewrite it so it fits that schema. Keep its meaning, do not grade the answer again, and reply with one \
JSON object only.

Problem:
{error}

Evaluation to repair:
{reply}"""

Parser = Callable[[str | None], ModeResult]


def cache_key(messages: list[dict[str, Any]], model: str, parameters: dict[str, Any]) -> str:
    return digest_json({"messages": messages, "model": model, "parameters": parameters})


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
    ) -> None:
        self.grader_type = grader_type
        """What the calls are recorded as coming from (a code grader's target proxy records its own)."""
        self.cache_only = cache_only
        """Reuse a recorded reply or give up: the judge cannot be called (no key), but a replay can
        still reproduce what was recorded."""
        self.ctx = ctx
        self.grader = grader
        self.judge = judge
        self.client = client
        self.outcome = JudgeOutcome(None)
        self._attempt_number = 0

    def run(self, messages: list[dict[str, Any]], parse: Parser) -> JudgeOutcome:
        key = cache_key(messages, self.judge.model, self.judge.parameters)
        if not self.ctx.options.no_cache and self._from_cache(messages, key, parse):
            return self.outcome
        if self.cache_only:
            return self.outcome
        repairable: str | None = None
        for _ in range(PARSE_ATTEMPTS):
            reply = self._send(messages, key, parse)
            if reply is None:  # the call itself failed after its retries: nothing more to try
                return self.outcome
            if self.outcome.result is not None:
                return self.outcome
            if reply.strip():
                repairable = reply
        if repairable is not None:
            repair = [
                messages[0],
                {"role": "user", "content": REPAIR_PROMPT.format(error=self.outcome.error, reply=repairable)},
            ]
            self._send(repair, cache_key(repair, self.judge.model, self.judge.parameters), parse)
        return self.outcome

    # -- internals ----------------------------------------------------------------------------

    def _from_cache(self, messages: list[dict[str, Any]], key: str, parse: Parser) -> bool:
        recorder = self.ctx.recorder
        found = recorder.find_judge_call(key)
        if found is None:
            return False
        reused_from, earlier = found
        if earlier.reply_sha256 is None:
            return False
        start = time.perf_counter()
        try:
            reply = recorder.get_blob(earlier.reply_sha256).decode("utf-8")
            result = parse(reply)
        except (BlobNotFound, UnicodeDecodeError, JudgeParseError):
            return False  # an unusable recorded reply is no reason to fail: ask the judge again
        self._record(
            messages,
            key,
            reply_sha256=earlier.reply_sha256,
            outcome="ok",
            latency_ms=round((time.perf_counter() - start) * 1000.0, 3),
            cache_hit=True,
            reused_from=reused_from,
        )
        self.outcome.result = result
        self.outcome.cache_hit = True
        self.outcome.last_reply = reply
        return True

    def _send(self, messages: list[dict[str, Any]], key: str, parse: Parser) -> str | None:
        """Send one request (with its transport retries); returns the reply text, None if the call failed."""
        exchanges = self.client.complete(self.judge, messages)
        for exchange in exchanges[:-1]:
            self._record_exchange(messages, key, exchange, exchange.outcome, exchange.error)
        final = exchanges[-1]
        if final.outcome != "ok":
            self._record_exchange(messages, key, final, final.outcome, final.error)
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
            self._record_exchange(messages, key, final, "parse_error", str(exc))
            return reply
        self._record_exchange(messages, key, final, "ok", None)
        self.outcome.result = result
        self.outcome.error = None
        self.outcome.parse_failure = False
        return reply

    def _record_exchange(
        self, messages: list[dict[str, Any]], key: str, exchange: Exchange, outcome: str, error: str | None
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
        )
        self.outcome.call_event_ids.append(ctx.recorder.record(event))
