"""Every export format writes, byte for byte, what it wrote before its reading and row building were
made faster (issue 31): the SHA-256 (first 16 hex digits) of each format's output for every AgentV run
under ``tests/fixtures/`` that imports, the repository's path in it written as ``<repo>``. The digests were
taken from main before that work. An export's bytes are what a user's scripts and diffs see: a change
that alters them on purpose must say so here, with the new digests (:func:`digests` gives them): the JSON
document's version 2 (each result's ``experiment``) changed every ``json`` digest, and nothing else; so did its
version 3 (each case's ``origin``, and a result that recorded no case given its run's eval snapshot's). The transcript
blob keeping every object's keys in their own order (``content.messages_json``, where it was canonical JSON) changed
the ``json`` digest of every run whose transcripts hold a key out of alphabetical order (a message's ``role`` before
its ``content``): its ``messages_sha256``, and nothing else. An imported grader's ``duration_ms``, ``started_at`` and
``ended_at``, written back in its ``scores[]`` entry, changed the ``agentv-jsonl`` digest of every run whose rows
have them, and nothing else. Each run is
imported into a store of its own: what else a store holds can change an export (the eval snapshot it names)."""

from __future__ import annotations

import hashlib
import io

import pytest
from fixture_paths import FIXTURES_DIR, REPO

from evalstore.replay.agentv.export import export_run
from evalstore.replay.agentv.importing import import_results

FORMATS = ("agentv-jsonl", "csv", "json")

DIGESTS = {
    "agentv/v4/rubric/dataset.eval.baseline.jsonl": ("485e7133f159ebe5", "2eb8301e6d896c37", "598898d1632d300d"),
    "agentv/v5-next/runs/2026-07-06T01-06-18-244Z": ("03ece689ddb43d9b", "fb735d433528afdc", "d7632f9fd5dae55b"),
    "agentv-agent-runs/runs/claude-skill-trigger": ("765590c2b6378b14", "c966689cafe428a1", "f43b7c79e8d6ef82"),
    "agentv-agent-runs/runs/copilot-skill-trigger": ("e4191ed9902b7d88", "1fdfd62ad1046172", "333a27191475e56f"),
    "agentv-agent-runs/runs/pi-skill-trigger": ("74745972992d8225", "ef0b377ec5ceed42", "bdcffd724091e269"),
    "agentv-example-runs/runs/assert": ("ec1a1c15bbaa3e24", "59302dd38b2aaec7", "4a6b95efe9b5ce99"),
    "agentv-example-runs/runs/basic": ("21c39a840ab68ad9", "439845d0678a9311", "6696a50f19f3dfc5"),
    "agentv-example-runs/runs/composite": ("e588554bc25f8d74", "d6fd4c31e034bed8", "2da7483d5e4b0213"),
    "agentv-example-runs/runs/execution-metrics": ("5f3e27398db3677f", "9777ad381cfb69e9", "8211942b5348b542"),
    "agentv-example-runs/runs/external-datasets": ("b086819b548da101", "5e37b4bd0c53fde9", "956b9a296c461f0f"),
    "agentv-example-runs/runs/file-changes": ("e7e610802128081c", "d8b12d93f64643fd", "c62cf772393b2fca"),
    "agentv-example-runs/runs/local-cli": ("6b6e8986e39288ca", "0a6c6ad95087cc09", "8849807b5894403f"),
    "agentv-example-runs/runs/multi-turn-conversation": ("dc6678ce45c86e24", "64c71c9cd6df419e", "b62d65a5d2b5adf2"),
    "agentv-example-runs/runs/multi-turn-conversation-live": (
        "8a445c325d0e1561",
        "76d7cdaa8e36c540",
        "226d2fd8647929f2",
    ),
    "agentv-example-runs/runs/rubric": ("b0cf7affd4302fa1", "4d27d5fed73daa8b", "401444d1ff1cc9c4"),
    "agentv-example-runs/runs/threshold-grader": ("f125e21ed12f047e", "1f06e18e6a33e5e3", "975ac5e93a286fde"),
    "agentv-example-runs/runs/tool-trajectory-advanced": ("3e02ed56764a3e9e", "b6df2bb526cce26b", "2485da435da11473"),
    "agentv-example-runs/runs/tool-trajectory-simple": ("ddc0e522629f1bfa", "4368649c6dc36aba", "8c8c69207713c0af"),
    "agentv-example-runs/runs/trials": ("f4937c3650122e64", "096675bbbf0abc50", "6f5a9aeadc3cfe96"),
    "agentv-example-runs/runs/weighted-graders": ("4603db519b3409b5", "3aba243a4d933a10", "5d982c92af71ce99"),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-01T10-00-00-000Z": (
        "be7fc47fc71854a8",
        "13e614a83cb56a59",
        "d02ca5a69c8edd16",
    ),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-08T10-00-00-000Z": (
        "da8f4f4d4ed669ca",
        "fdc0a18e958c0cf2",
        "180f41cbc5d10834",
    ),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-15T10-00-00-000Z": (
        "31e4f1ed669ec73d",
        "36f9e0bef23c6975",
        "0e9b031cc10950ae",
    ),
    "agentv-graders/runs/metrics": ("2d2c1efa81b7bc2d", "3daa77e5c9fcc75c", "90a8ae45b6e4d09e"),
    "agentv-graders/runs/structured": ("3a4b7a3ec31c73cb", "c74f05c31bdb8209", "f4c08669da970bb3"),
    "agentv-graders/runs/trajectory": ("48f2409bcfa523c2", "e0de632e3b3c496e", "d654d8beb4dbc7c5"),
    "agentv-newuser-runs/runs/deterministic-graders": ("9f5298379e52b27f", "663241824e83f42f", "6b10c262f2ffbbf1"),
    "agentv-newuser-runs/runs/input-files-shorthand": ("22c1471f68e7167b", "2b53152fb990f9b2", "c032f19213d75300"),
    "agentv-newuser-runs/runs/matrix-evaluation": ("87acf6284f8aa042", "4d755ca08e799a05", "e3983d93b0432098"),
    "agentv-newuser-runs/runs/matrix-evaluation-targets": ("17bc45ef346c30c9", "078ea67c5e00b0c2", "ab44f24078aefb9d"),
    "agentv-newuser-runs/runs/suite-level-input-files": ("2321a8e140713838", "04836b3c471d00ed", "a9c16f0f6c0395fa"),
    "agentv-newuser-runs/runs/test-vars-templating": ("fc0d9234d651a813", "7f07c54968f90390", "629e7ed4bd057b32"),
    "agentv-newuser-runs/runs/trial-output-consistency": ("4948df1fbf829904", "e170438c86248e20", "a1f3bc2642df487a"),
    "agentv-newuser2/runs/bad-regex": ("dad5c20642cbbfa1", "e7bb280e1e231531", "cc1dd1b3e40fc041"),
    "agentv-newuser2/runs/extract": ("4b002682fef563c6", "d23234bfdd0fd83f", "23760d4578ddaf75"),
    "agentv-newuser2/runs/ranges": ("45eb0a0113407e0d", "22e91cbe812d70ff", "b63d5f2337501b3a"),
    "agentv-newuser2/runs/review": ("0237fbd56108d6d6", "a01744f38326cc6f", "65a572094fd5b8cb"),
    "agentv-newuser2/runs/support": ("b6b7b6282a428337", "a43867097245405c", "bc78c3b591af9584"),
    "agentv-newuser2/trials-mean/run": ("b3d74bf426f15653", "5e53a03e9f443411", "657c7860e451d12b"),
    "agentv-real/runs/hooks-fail": ("63d3e53cec876265", "fda7d79737fbca71", "3740b50bfc0d0ceb"),
    "agentv-real/runs/hooks-fail-all": ("feb793fab72f9ada", "6b3e3395b68d1f57", "c1450f160541835c"),
    "agentv-real/runs/hooks-only": ("d2503c92534c1d5a", "f0e6113e1589c557", "a4519010df65c2c5"),
    "agentv-real/runs/hooks-per-test": ("4c5727f2186131df", "8c4f54cad388fae8", "bc7ce022e24461c1"),
    "agentv-real/runs/hooks-shared": ("90318a076ec30f1c", "52e6b1d99fb1c6cb", "95b426ee327e4d8c"),
    "agentv-real/runs/hooks-test-first": ("5e5266c390407ad8", "f813a4ddeec2b53a", "95b5658f0aee681e"),
    "agentv-real/runs/hooks-test-workspace": ("7fa12f8e7311f11c", "59767c22fcf916ca", "3762667b7ceaeacc"),
    "agentv-real/runs/judge-fails": ("7c9307b96ceda708", "1019b4c9661f19ab", "45ab41c6db3acc26"),
    "agentv-real/runs/text-and-files": ("1acb4b517ec46449", "23a0e02c9d8a5b7d", "999b626c13c8889c"),
    "agentv-real/runs/workspace": ("bcd580134f716933", "6eaa7df61b5fac9a", "312bf4e9ad20801a"),
    "handmade/v4-run": ("bd9579a7c414f955", "fca908cae971da43", "786d0e758b304587"),
}
"""Fixture run (under tests/fixtures/) -> the digests of its agentv-jsonl, csv and json exports."""


def digests(store, path) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    run_id = import_results(store, FIXTURES_DIR / path).run_id
    found = []
    for fmt in FORMATS:
        out = io.StringIO()
        export_run(store, run_id, fmt, out, workers=1)
        text = out.getvalue().replace(str(REPO), "<repo>")
        found.append(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])
    return tuple(found)


@pytest.mark.parametrize("path", sorted(DIGESTS))
def test_every_format_writes_the_bytes_it_wrote_before(store, path: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # an import may find the eval file through the current directory
    assert dict(zip(FORMATS, digests(store, path))) == dict(zip(FORMATS, DIGESTS[path]))
