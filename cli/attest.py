"""``evalstore keys``, ``checkpoint``, ``attest``, ``verify-attestation``, and ``--checkpoint FILE`` for
commands that write runs. ``evalstore verify --checkpoint`` lives with ``verify`` (cli/db.py).

``cryptography`` is imported when a key is used, not when a command that merely offers ``--key`` loads."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click

from evalstore.cli.context import open_store
from evalstore.cli.errors import EXIT_FAILED, UsageError, handle_errors
from evalstore.cli.files import output_option
from evalstore.cli.output import echo, json_option, note, print_json

KEY_ENV = "EVALSTORE_SIGNING_KEY"


def key_option(f: Callable) -> Callable:
    return click.option(
        "--key",
        "key_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar=KEY_ENV,
        help=f"Signing key file (default: $XDG_CONFIG_HOME/evalstore/signing.key; env {KEY_ENV}).",
    )(f)


def pubkey_option(*, required: bool = False) -> Callable:
    return click.option(
        "--pubkey",
        "pubkey_path",
        required=required,
        type=click.Path(dir_okay=False, path_type=Path),
        help="The signer's public key, as evalstore keys show prints it"
        + ("." if required else " (default: the public half of your own signing key)."),
    )


def load_signing_key(path: Path | None):  # type: ignore[no-untyped-def]
    from evalstore.replay.attest.keys import load_signing_key

    return load_signing_key(path)


def load_verifier_key(path: Path):  # type: ignore[no-untyped-def]
    from evalstore.replay.attest.keys import load_verifier_key

    return load_verifier_key(path)


def verifier_for(pubkey_path: Path | None, key_path: Path | None = None, *, checking: str = "the check"):  # type: ignore[no-untyped-def]
    """The key a check trusts: the one given, else the public half of the local signing key. With
    neither, the error asks for ``--pubkey``: someone checking another person's file needs their public
    key, not a key of their own (``keys init``)."""
    if pubkey_path is not None:
        return load_verifier_key(pubkey_path)
    if key_path is None:
        from evalstore.replay.attest.keys import default_key_path

        if not default_key_path().exists():
            raise UsageError(
                f"{checking}: give the signer's public key with --pubkey FILE (`evalstore keys show` prints it "
                f"where the key is); there is no local signing key ({default_key_path()}) to check with"
            )
    return load_signing_key(key_path).verifier


def write_and_report(ctx: click.Context, key_path: Path | None, out: Path | None, *, origin: str | None = None):  # type: ignore[no-untyped-def]
    from evalstore.replay.attest.checkpoint import write_checkpoint

    written = write_checkpoint(open_store(ctx, create=False), load_signing_key(key_path), origin=origin)
    if out is not None:
        out.write_text(written.note, encoding="utf-8")
    return written


def checkpoint_option(f: Callable) -> Callable:
    """``--checkpoint FILE`` (and ``--key``) for a command that writes a run: once it has finished (its
    checks passed or failed alike), sign a checkpoint of the log and write it to FILE. The key is read
    before the command does any work, so a missing key stops it at once."""

    @wraps(f)
    def wrapper(*args: Any, checkpoint_path: Path | None, key_path: Path | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if checkpoint_path is not None:
            handle_errors(load_signing_key)(key_path)
        try:
            result = f(*args, **kwargs)
        except SystemExit as exc:
            if checkpoint_path is not None and exc.code in (0, 1, None):
                handle_errors(_after)(ctx, key_path, checkpoint_path)
            raise
        if checkpoint_path is not None:
            handle_errors(_after)(ctx, key_path, checkpoint_path)
        return result

    option = click.option(
        "--checkpoint",
        "checkpoint_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="When done, sign a checkpoint of the log (as evalstore checkpoint does) and write it to this file.",
    )
    return option(key_option(wrapper))


def _after(ctx: click.Context, key_path: Path | None, out: Path) -> None:
    written = write_and_report(ctx, key_path, out)
    cp = written.checkpoint
    note(f"checkpoint of {cp.size} events ({cp.origin}) signed by {written.key_name}, written to {out}")


@click.group()
def keys() -> None:
    """Create and show the Ed25519 key that signs checkpoints.

    \b
    Example:
      evalstore keys init --name ci@example
      evalstore keys show
    """


@keys.command()
@key_option
@click.option("--name", help="The key's name in signatures (default: USER@HOST; no spaces or '+').")
@click.option("--force", is_flag=True, help="Replace a key that already exists at that path.")
@handle_errors
def init(key_path: Path | None, name: str | None, force: bool) -> None:
    """Create a signing key (file mode 0600), outside the store; print its public key.

    The store never holds the private key: it records the public key and name with the first checkpoint
    the key signs.

    \b
    Example:
      evalstore keys init --name ci.example.com/evals
    """
    import getpass
    import socket

    from evalstore.replay.attest.keys import create_key_file, default_key_path

    path = key_path or default_key_path()
    name = name or f"{getpass.getuser()}@{socket.gethostname()}".replace(" ", "-").replace("+", "-")
    key = create_key_file(path, name, force=force)
    note(f"signing key written to {path}")
    echo(key.verifier.encoded())


@keys.command()
@key_option
@json_option
@handle_errors
def show(key_path: Path | None, as_json: bool) -> None:
    """Print the public (verifier) key of a signing key: what others give to --pubkey.

    \b
    Example:
      evalstore keys show > evalstore.pub
    """
    key = load_signing_key(key_path).verifier
    if as_json:
        print_json({"name": key.name, "key_id": key.key_id.hex(), "public_key": key.encoded()})
    else:
        echo(key.encoded())


@click.command()
@key_option
@click.option("--origin", help="The log's name in the checkpoint (default: the one its last checkpoint used).")
@output_option("-o", "--output", help="Also write it to this file.")
@json_option
@click.pass_context
@handle_errors
def checkpoint(
    ctx: click.Context, key_path: Path | None, origin: str | None, output: Path | None, as_json: bool
) -> None:
    """Sign a checkpoint of the log's head (C2SP signed note), record it as an event, and print it.

    The checkpoint names the log (origin), its number of events, the Merkle root of their hashes and the
    last event's hash. Commit it to git or keep it as a CI artifact; evalstore verify --checkpoint FILE
    later proves the log still holds exactly those events.

    \b
    Example:
      evalstore checkpoint -o checkpoints/$(date +%F).txt
    """
    written = write_and_report(ctx, key_path, output, origin=origin)
    cp = written.checkpoint
    if as_json:
        print_json(
            {
                "origin": cp.origin,
                "size": cp.size,
                "root_hash": cp.root_hash.hex(),
                "head_hash": cp.head_hash,
                "signer": written.key_name,
                "note": written.note,
            }
        )
    else:
        echo(written.note, nl=False)


@click.command()
@click.argument("run")
@output_option("-o", "--output", help="Write it here (default: stdout).")
@click.pass_context
@handle_errors
def attest(ctx: click.Context, run: str, output: Path | None) -> None:
    """Write an attestation of RUN's results that anyone can check offline with its signer's public key.

    An in-toto Statement (the run, its eval snapshot digest, per test the score and verdicts with their
    event hashes), the latest signed checkpoint covering those events, the events themselves and their
    Merkle inclusion proofs. Needs a checkpoint written after the run (evalstore checkpoint). RUN: an id,
    a unique prefix, or last.

    \b
    Example:
      evalstore attest rec-20261122T163434-dcd7c0 -o results.attestation.json
    """
    from evalstore.replay.analysis.views import resolve_run
    from evalstore.replay.attest.attestation import build_attestation

    store = open_store(ctx, create=False)
    doc = build_attestation(store, resolve_run(store, run))
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        results = doc["statement"]["predicate"]["results"]
        note(f"attestation of {len(results)} results of {doc['statement']['predicate']['run_id']} written to {output}")


@click.command(name="verify-attestation")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@pubkey_option(required=True)
@json_option
@handle_errors
def verify_attestation(file: Path, pubkey_path: Path, as_json: bool) -> None:
    """Check an attestation FILE offline, with no store: signature, event hashes, inclusion proofs, claims.

    Exits 0 when every claimed score and verdict is what an event in the signed log says, 1 naming the
    first one that is not.

    \b
    Example:
      evalstore verify-attestation results.attestation.json --pubkey evalstore.pub
    """
    from evalstore.replay.attest.attestation import load_attestation
    from evalstore.replay.attest.attestation import verify_attestation as check
    from evalstore.replay.errors import AttestationFormatError

    key = load_verifier_key(pubkey_path)
    try:
        doc = load_attestation(file.read_text(encoding="utf-8"), str(file))
    except UnicodeDecodeError as exc:
        raise AttestationFormatError(f"{file}: not JSON: {exc}") from None
    result = check(doc, key)
    if as_json:
        print_json({"ok": result.ok, **result.__dict__})
    elif result.ok:
        echo(
            f"ok: run {result.run_id}: {result.tests} results, {result.verdicts} verdicts proven against "
            f"checkpoint {result.origin} of {result.size} events signed by {result.signer}"
        )
    else:
        echo(f"FAILED: {result.problem}", err=True)
    if not result.ok:
        sys.exit(EXIT_FAILED)
