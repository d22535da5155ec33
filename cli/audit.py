"""``evalstore audit RUN TEST``: where a score came from, down to the bytes."""

from __future__ import annotations

import json
import sys

import click

from evalstore.cli.context import complete_run_id, complete_test_id, open_store
from evalstore.cli.errors import EXIT_FAILED, handle_errors
from evalstore.cli.output import echo, fmt_score, json_option, print_json, visible


def _short(d: str | None) -> str:
    return d[:12] if d else "-"


def _one(value: object) -> str:
    """A stored value inside a line (a test id, a path, evidence): its line breaks written out, so it
    cannot start a forged line of its own; the prompt blocks keep theirs."""
    return visible(str(value), one_line=True)


def _mark(status: str | None) -> str:
    return "" if status in (None, "ok") else f" [{status}]"


def _echo_prompt(prompt: object) -> None:
    """A recorded prompt, each message under its role (the viewer shows the same role blocks)."""
    from evalstore.replay.analysis.prompts import prompt_messages, prompt_text

    messages = prompt_messages(prompt)
    if messages is None:
        echo(f"      --- request ---\n{prompt_text(prompt)}")
        return
    for m in messages:
        echo(f"      --- {m.role} ---\n{m.text}")


def _readable(record: str) -> str:
    """A source record for people: JSON (an Inspect sample, stored compact: one line of 70 KB) indented,
    anything else as stored. ``--json`` keeps the stored text."""
    try:
        return json.dumps(json.loads(record), indent=2, ensure_ascii=False)
    except ValueError:
        return record


def print_audit(report: dict, *, show_prompt: bool = False, show_source: bool = False) -> None:
    r = report["run"]
    echo(f"run {r['run_id']}  kind={r['kind']}  parent={r['parent_run_id'] or '-'}  evalstore {r['evalstore_version']}")
    if r["ancestors"]:
        echo(f"  lineage: {' <- '.join([r['run_id'], *r['ancestors']])}")
    if r["target_name"]:
        echo(f"  target {r['target_name']}: {json.dumps(r['target'], sort_keys=True)}")
    for name, config in (r.get("targets") or {}).items():
        echo(f"  target {name}: {json.dumps(config, sort_keys=True)}")
    if r["source"]:
        echo(f"  imported from {_one(r['source']['file'])} ({r['source_format']})")
    for f in r["eval_snapshot"]:
        echo(f"  snapshot {f['role']:<13} {_short(f['sha256'])} {_one(f['path'])}{_mark(f['blob'])}")
    if r["overrides"]:
        shown = {k: v for k, v in r["overrides"].items() if v not in (None, [], {}, False)}
        if shown:
            echo(f"  overrides: {json.dumps(shown, sort_keys=True)}")
    for t in report["tests"]:
        echo(
            f"\ntest {_one(t['test_id'])} target={_one(t['target'] or '-')} attempt={t['attempt']}: "
            f"score {fmt_score(t['score'])} {'pass' if t['passed'] else 'fail'} ({t['status']}, {t['origin']})"
        )
        for v in t["verdicts"]:
            echo(
                f"  verdict {_one(v['grader'])} ({v['grader_type']}): {fmt_score(v['score'])} {v['verdict']} "
                f"status={v['status']} origin={v['origin']}{' cache-hit' if v['cache_hit'] else ''}"
                + (f" — {_one(v['origin_note'])}" if v["origin_note"] else "")
            )
            for a in v["assertions"]:
                echo(
                    f"    {'✓' if a['passed'] else '✗'} {_one(a['text'])}"
                    + (f" — {_one(a['evidence'])}" if a.get("evidence") else "")
                )
            for e in v["evidence"]:
                echo(f"    note: {_one(e)}")
            for e in v.get("edits", []):
                echo(
                    f"    edit {e['edit']} of score {e['score']} by {e['author'] or '?'} at {e['edited_at'] or '?'}: "
                    f"{json.dumps(e['previous_value'])} -> {json.dumps(e['value'])}"
                    + (f" — {_one(e['reason'])}" if e["reason"] else "")
                )
            if v["source"]:
                echo(f"    imported from {_one(v['source']['file'])}:{v['source'].get('line')}")
            if v["rendered_prompt_sha256"]:
                echo(
                    f"    AgentV's rendered grader request: {_short(v['rendered_prompt_sha256'])}{_mark(v['rendered_prompt_blob'])}"
                )
                if show_prompt and v["rendered_prompt"] is not None:
                    _echo_prompt(v["rendered_prompt"])
            for c in v["grader_calls"]:
                if c.get("missing"):
                    echo(f"    call {c['event_id']}: event not found")
                    continue
                if c["call"] == "judge":
                    echo(
                        f"    judge call #{c['attempt']} model={c['model']} params={json.dumps(c['parameters'], sort_keys=True)} "
                        f"outcome={c['outcome']} cache={'hit' if c['cache_hit'] else 'miss'} "
                        f"prompt={_short(c['request_sha256'])}{_mark(c['request_blob'])} reply={_short(c['reply_sha256'])}{_mark(c['reply_blob'])}"
                    )
                    if show_prompt and c.get("prompt") is not None:
                        _echo_prompt(c["prompt"])
                        echo(f"      --- reply ---\n{c.get('reply')}")
                else:
                    echo(
                        f"    process argv={c['argv']} script={_short(c['script_sha256'])} exit={c['exit_code']} "
                        f"outcome={c['outcome']} stdin={_short(c['request_sha256'])}{_mark(c['request_blob'])}"
                    )
                    if show_prompt and c.get("stdin") is not None:
                        echo(f"      --- stdin ---\n{c['stdin']}")
                    if c.get("stdout"):
                        echo(f"      stdout: {_one(c['stdout'].strip()[:500])}")
                    if c.get("stderr"):
                        echo(f"      stderr: {_one(c['stderr'].strip()[:500])}")
            for p in v["preprocessing"]:
                if p.get("missing"):
                    echo(f"    preprocessing {p['event_id']}: event not found")
                    continue
                echo(
                    f"    preprocessing {_one(p['path'])} ({p['media_type']}): {p['status']} argv={p['argv']} "
                    f"script={_short(p['script_sha256'])} artifact={_short(p['artifact_sha256'])}{_mark(p['artifact_blob'])} "
                    f"output={_short(p['output_sha256'])}{_mark(p['output_blob'])}"
                    + (" reused" if p["reused_from"] else "")
                    + (f" — {_one(p['reason'])}" if p["reason"] else "")
                )
        for a in t["artifacts"]:
            echo(
                f"  artifact {_one(a['path'])} ({a['media_type']}) {a['status']} sha256={_short(a['sha256'])} "
                f"size={a['size']}{_mark(a['blob'])}" + (f" — {_one(a['reason'])}" if a["reason"] else "")
            )
        tr = t["transcript"]
        for c in tr["failed_calls"] if tr else []:
            echo(
                f"  target call {c['provider_attempt']} failed, tried again {c['wait_ms'] / 1000:g} s later: "
                f"{c['status']} exit={c['exit_code']} — {_one(c['error'])}"
            )
        if tr:
            echo(
                f"  transcript {tr['event_id']} in run {tr['run_id']}: messages={_short(tr['messages_sha256'])}"
                f"{_mark(tr['blob'])} status={tr['status']}"
                + (f" exit={tr['exit_code']}" if tr["exit_code"] is not None else "")
                + (f" (target call {tr['provider_attempt']})" if tr["provider_attempt"] else "")
                + (f" — {_one(tr['error'])}" if tr.get("error") else "")
            )
            if tr.get("source_record_sha256"):
                echo(
                    f"  source record {_short(tr['source_record_sha256'])}{_mark(tr['source_record_blob'])} "
                    f"(the result as its source wrote it: an Inspect sample), {len(tr['attachments'])} attachment(s)"
                    + ("" if show_source else "; --show-source prints it")
                )
                if show_source and tr.get("source_record") is not None:
                    echo(f"    --- source record ---\n{_readable(tr['source_record'])}")
        else:
            echo("  transcript: none recorded")
        ws = t.get("workspace")
        if ws:
            echo(
                f"  workspace snapshot {ws['event_id']} in run {ws['run_id']}: {ws['file_count']} files, "
                f"{ws['total_bytes']} bytes" + (f", PARTIAL ({ws['omitted_count']} left out)" if ws["partial"] else "")
            )
            for e in ws["entries"]:
                if e.get("kind", "file") == "file":
                    echo(
                        f"    {_one(e['path'])} sha256={_short(e.get('sha256'))} size={e.get('size')}{_mark(e['blob'])}"
                    )
                else:
                    echo(f"    {_one(e['path'])} ({e['kind']}{' -> ' + e['target'] if e.get('target') else ''})")
            for o in ws["omitted"]:
                echo(f"    left out: {_one(o)}")
    problems = report["blob_problems"]
    echo(
        f"\n{report['blobs_checked']} digests checked against the blob store: "
        + (
            "all match"
            if not problems
            else f"{len(problems)} PROBLEM(S): " + ", ".join(f"{d[:12]} {s}" for d, s in problems.items())
        )
    )


@click.command()
@click.argument("run", shell_complete=complete_run_id)
@click.argument("test_id", shell_complete=complete_test_id)
@click.option("--grader", help="Only this grader's verdict.")
@click.option(
    "--show-prompt",
    is_flag=True,
    help="Include rendered judge prompts and raw replies, and what code graders read on stdin.",
)
@click.option(
    "--show-source",
    is_flag=True,
    help="Include the imported source record kept with the transcript (an Inspect sample as stored).",
)
@json_option
@click.pass_context
@handle_errors
def audit(ctx, run: str, test_id: str, grader: str | None, show_prompt: bool, show_source: bool, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    """Trace every verdict of TEST_ID in RUN back to its judge calls or grader processes, conversions,
    artifacts, transcript and run, checking each digest against the blob store (exit 1 on a mismatch).

    RUN: an id, a unique prefix, or last.

    \b
    Example:
      evalstore audit last quarterly-report --show-prompt
    """
    from evalstore.replay.analysis.audit import audit_test
    from evalstore.replay.analysis.views import resolve_run

    store = open_store(ctx, create=False)
    report = audit_test(
        store, resolve_run(store, run), test_id, grader=grader, show_prompt=show_prompt, show_source=show_source
    )
    if as_json:
        print_json(report)
    else:
        print_audit(report, show_prompt=show_prompt, show_source=show_source)
    if report["blob_problems"]:
        sys.exit(EXIT_FAILED)
