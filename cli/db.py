"""``evalstore db ...`` (migrations, rebuild) and ``evalstore verify``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click

from evalstore.cli.attest import key_option, pubkey_option, verifier_for
from evalstore.cli.context import engine_for, open_store
from evalstore.cli.errors import EXIT_FAILED, handle_errors
from evalstore.cli.output import echo, json_option, print_json


@click.group()
def db() -> None:
    """Schema migrations and projection maintenance.

    \b
    Example:
      evalstore db current
      evalstore --db postgresql://ci@db/evals db upgrade
    """


@db.command()
@click.argument("revision", default="head")
@click.pass_context
@handle_errors
def upgrade(ctx: click.Context, revision: str) -> None:
    """Apply migrations up to REVISION (default: head).

    \b
    Example:
      evalstore db upgrade
    """
    from evalstore.store import engine as store_engine

    _migrate(ctx, store_engine.upgrade, revision)


@db.command()
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Downgrade to base even though the store holds events (they are deleted).")
@click.pass_context
@handle_errors
def downgrade(ctx: click.Context, revision: str, yes: bool) -> None:
    """Revert migrations down to REVISION (base removes everything: with events stored, only with --yes).

    Revision 0002 is not reverted while blobs are compressed against a dictionary (0001 cannot read them).

    \b
    Example:
      evalstore db downgrade 0001
    """
    from evalstore.store import engine as store_engine

    if revision == "base" and not yes:
        engine = engine_for(ctx, create=False)
        try:
            held = store_engine.event_count(engine)
        finally:
            engine.dispose()
        if held:
            raise click.UsageError(
                f"downgrading to base deletes the store's {held} events, its append-only log; add --yes to do it"
            )
    _migrate(ctx, store_engine.downgrade, revision)


def _migrate(ctx: click.Context, step, revision: str) -> None:  # type: ignore[no-untyped-def]
    from evalstore.store import engine as store_engine

    engine = engine_for(ctx)
    try:
        step(engine, revision)
        echo(f"store at revision {store_engine.current_revision(engine) or 'base'}")
    finally:
        engine.dispose()


@db.command()
@json_option
@click.pass_context
@handle_errors
def current(ctx: click.Context, as_json: bool) -> None:
    """Show the store's schema revision and the head this evalstore expects.

    \b
    Example:
      evalstore db current --json
    """
    from evalstore.store import SchemaOutOfDate, StoreMissing
    from evalstore.store import engine as store_engine

    engine = engine_for(ctx, create=False)
    problem = None
    try:
        cur, head = store_engine.current_revision(engine), store_engine.head_revision()
        try:
            store_engine.ensure_current(engine, create=False, adopt_empty=False)  # it only shows
        except StoreMissing:
            pass  # an empty database: "none (empty store)" says it
        except SchemaOutOfDate as exc:  # behind, ahead of this evalstore, or tables without a record
            problem = str(exc)
    finally:
        engine.dispose()
    if as_json:
        print_json({"current": cur, "head": head, "up_to_date": cur == head, "problem": problem})
    else:
        shown = cur or ("none" if problem else "none (empty store)")
        echo(f"current: {shown}\nhead:    {head}")
        if problem:
            echo(f"note:    {problem}")


@db.command()
@json_option
@handle_errors
def history(as_json: bool) -> None:
    """List the migrations, newest first.

    \b
    Example:
      evalstore db history
    """
    from alembic.script import ScriptDirectory

    from evalstore.store import engine as store_engine

    script = ScriptDirectory.from_config(store_engine.alembic_config("sqlite://"))
    revisions = [
        {"revision": r.revision, "down_revision": r.down_revision, "message": (r.doc or "").splitlines()[0]}
        for r in script.walk_revisions()
    ]
    if as_json:
        print_json(revisions)
    else:
        for r in revisions:
            echo(f"{r['down_revision'] or '<base>'} -> {r['revision']}: {r['message']}")


@db.command()
@click.pass_context
@handle_errors
def rebuild(ctx: click.Context) -> None:
    """Drop the projections (runs, results, verdicts, reuse indexes) and derive them again from the log.

    \b
    Example:
      evalstore db rebuild
    """
    count = open_store(ctx).rebuild_projections()
    echo(f"rebuilt projections from {count} events")


def _damage_fails(f: Callable[..., None]) -> Callable[..., None]:
    """``verify``: damage found before a row is read (the migration record) fails like any other (exit 1)."""

    @wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            f(*args, **kwargs)
        except Exception as exc:
            # Imported when an error is raised, not when the command is defined: `verify --help` loads no store.
            from evalstore.store.errors import StoreDamaged

            if not isinstance(exc, StoreDamaged):
                raise
            if kwargs.get("as_json"):
                print_json({"ok": False, "events": 0, "blobs": 0, "problem": str(exc)})
            else:
                echo(f"FAILED: {exc}", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper


@click.command()
@click.option(
    "--checkpoint",
    "checkpoint_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also check that the log holds exactly the events this signed checkpoint covers.",
)
@pubkey_option()
@key_option
@json_option
@click.pass_context
@handle_errors
@_damage_fails
def verify(
    ctx: click.Context, checkpoint_path: Path | None, pubkey_path: Path | None, key_path: Path | None, as_json: bool
) -> None:
    """Recompute the hash chain, every blob digest and the projections.

    With --checkpoint FILE, also check the checkpoint's signature and that the log still holds exactly
    the events it covers: a log cut short, rewritten or rebuilt passes the chain check but fails this one.
    Exits 0 when the store is sound, 1 naming the first event seq, blob or checkpoint field that does not match.

    \b
    Example:
      evalstore verify --json
      evalstore verify --checkpoint checkpoints/2026-11-22.txt --pubkey evalstore.pub
    """
    signed = None
    if checkpoint_path is not None:
        from evalstore.replay.attest.checkpoint import read_checkpoint_file

        signed = read_checkpoint_file(checkpoint_path)  # a file that is not one is named so before any key
        key = verifier_for(pubkey_path, key_path, checking=f"--checkpoint {checkpoint_path}")
    store = open_store(ctx, create=False)
    report = store.verify()
    info: dict = {"ok": report.ok, "events": report.events, "blobs": report.blobs, "problem": report.problem}
    lines = [f"ok: {report.events} events, {report.blobs} blobs verified"]
    # A store that fails its own check is reported as such: reading its prefix for the checkpoint would
    # only fail again, on the same damage, as an error.
    if signed is not None and report.ok:
        from evalstore.replay.attest.checkpoint import check_checkpoint

        check = check_checkpoint(store, signed, key)
        cp = check.checkpoint
        info["checkpoint"] = {"origin": cp.origin, "size": cp.size, "signer": check.signer, "problem": check.problem}
        if report.ok and not check.ok:
            info["ok"], info["problem"] = False, check.problem
        lines.append(f"ok: checkpoint {cp.origin} of {cp.size} events signed by {check.signer} matches the log")
    if as_json:
        print_json(info)
    elif info["ok"]:
        echo("\n".join(lines))
    else:
        echo(f"FAILED: {info['problem']}", err=True)
    if not info["ok"]:
        sys.exit(EXIT_FAILED)
