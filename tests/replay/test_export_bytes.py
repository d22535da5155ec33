"""Every export format writes, byte for byte, what it wrote before its reading and row building were
made faster (issue 31): the SHA-256 (first 16 hex digits) of each format's output for every AgentV run
under ``tests/fixtures/`` that imports, the repository's path in it written as ``<repo>``. The digests were
taken from main before that work. An export's bytes are what a user's scripts and diffs see: a change
that alters them on purpose must say so here, with the new digests (:func:`digests` gives them): the JSON
document's version 2 (each result's ``experiment``) changed every ``json`` digest, and nothing else; so did its
version 3 (each case's ``origin``, and a result that recorded no case given its run's eval snapshot's). Each run is
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
    "agentv/v5-next/runs/2026-07-06T01-06-18-244Z": ("78b19b9e609cc63d", "fb735d433528afdc", "aa884c473aea4da4"),
    "agentv-agent-runs/runs/claude-skill-trigger": ("f8c97674c504225b", "c966689cafe428a1", "800a37c5bf7da6fa"),
    "agentv-agent-runs/runs/copilot-skill-trigger": ("1687c2e6d3381b58", "1fdfd62ad1046172", "a43d3e988799404b"),
    "agentv-agent-runs/runs/pi-skill-trigger": ("a09aac1a50e3bbba", "ef0b377ec5ceed42", "4a235966b32b4ae3"),
    "agentv-example-runs/runs/assert": ("26824a612d4d500d", "59302dd38b2aaec7", "9ff728006a9849e7"),
    "agentv-example-runs/runs/basic": ("eff3f22d5139560c", "439845d0678a9311", "b1a1ffaec0693f1e"),
    "agentv-example-runs/runs/composite": ("5cb6b0790c9ccfc7", "d6fd4c31e034bed8", "6c03eb6da768b6fb"),
    "agentv-example-runs/runs/execution-metrics": ("a6fd594153bfde2e", "9777ad381cfb69e9", "553c08dfb028a472"),
    "agentv-example-runs/runs/external-datasets": ("b086819b548da101", "5e37b4bd0c53fde9", "5f4eff9e0f8bb0a4"),
    "agentv-example-runs/runs/file-changes": ("be725208c9b697c4", "d8b12d93f64643fd", "25f97f23cb4e590a"),
    "agentv-example-runs/runs/local-cli": ("6b6e8986e39288ca", "0a6c6ad95087cc09", "1d29876858abacf8"),
    "agentv-example-runs/runs/multi-turn-conversation": ("33f827862489bc11", "64c71c9cd6df419e", "16d893fb4cc898c0"),
    "agentv-example-runs/runs/multi-turn-conversation-live": (
        "8a445c325d0e1561",
        "76d7cdaa8e36c540",
        "bf4cdeefd896b93d",
    ),
    "agentv-example-runs/runs/rubric": ("1030ef90df46227f", "4d27d5fed73daa8b", "b1f0cb2873904e0e"),
    "agentv-example-runs/runs/threshold-grader": ("05b7ea6ca33bee8e", "1f06e18e6a33e5e3", "83600a60facbbb3a"),
    "agentv-example-runs/runs/tool-trajectory-advanced": ("b2db50b5676b1384", "b6df2bb526cce26b", "1fe1561a17ed9e62"),
    "agentv-example-runs/runs/tool-trajectory-simple": ("546ee5d1f98a4caf", "4368649c6dc36aba", "290673f4647de969"),
    "agentv-example-runs/runs/trials": ("f4937c3650122e64", "096675bbbf0abc50", "b429ca0d46d4c1d3"),
    "agentv-example-runs/runs/weighted-graders": ("527f0490f9d5f7b8", "3aba243a4d933a10", "6b21070d16749f92"),
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
    "agentv-graders/runs/metrics": ("b9a526256c038a14", "3daa77e5c9fcc75c", "6e3871a4f23b45ab"),
    "agentv-graders/runs/structured": ("7fd4abd9d5473330", "c74f05c31bdb8209", "1c9db8fadc573c7f"),
    "agentv-graders/runs/trajectory": ("003b051a6e964c3a", "e0de632e3b3c496e", "b776cdaf55f965e8"),
    "agentv-newuser-runs/runs/deterministic-graders": ("58bae950fe3f5772", "663241824e83f42f", "a7058924149921e1"),
    "agentv-newuser-runs/runs/input-files-shorthand": ("22c1471f68e7167b", "2b53152fb990f9b2", "3fd90b2bbda214a4"),
    "agentv-newuser-runs/runs/matrix-evaluation": ("87acf6284f8aa042", "4d755ca08e799a05", "cc06e947656d06c8"),
    "agentv-newuser-runs/runs/matrix-evaluation-targets": ("17bc45ef346c30c9", "078ea67c5e00b0c2", "2f7bf8751f27a50f"),
    "agentv-newuser-runs/runs/suite-level-input-files": ("2321a8e140713838", "04836b3c471d00ed", "dbe36be909e2ed1f"),
    "agentv-newuser-runs/runs/test-vars-templating": ("fc0d9234d651a813", "7f07c54968f90390", "a9ac5a773198901e"),
    "agentv-newuser-runs/runs/trial-output-consistency": ("d4a8eadc2e24b363", "e170438c86248e20", "8b60d3aee715c4ac"),
    "agentv-newuser2/runs/bad-regex": ("3fc127f52c3b5f89", "e7bb280e1e231531", "2e98f8542ec8cb23"),
    "agentv-newuser2/runs/extract": ("13bbcabf06f2063f", "d23234bfdd0fd83f", "66706eca58f57227"),
    "agentv-newuser2/runs/ranges": ("09fa3533538704c3", "22e91cbe812d70ff", "acb08d4fd5802811"),
    "agentv-newuser2/runs/review": ("33ff50d363a27f0b", "a01744f38326cc6f", "fdc61a1347613baa"),
    "agentv-newuser2/runs/support": ("9f9ab6b3b8e1e448", "a43867097245405c", "773cc0008f678a2c"),
    "agentv-newuser2/trials-mean/run": ("b3ee3981ddd3bb99", "5e53a03e9f443411", "6f3c0e40f33dd21b"),
    "agentv-real/runs/hooks-fail": ("ec55bec9135c2aee", "fda7d79737fbca71", "b89ea75d5ae9d8d5"),
    "agentv-real/runs/hooks-fail-all": ("feb793fab72f9ada", "6b3e3395b68d1f57", "eaa5337638d90cac"),
    "agentv-real/runs/hooks-only": ("ab63ab4a2c030b6e", "f0e6113e1589c557", "82b9a3bc3aa41210"),
    "agentv-real/runs/hooks-per-test": ("2c4f52bf41c7d9a7", "8c4f54cad388fae8", "fba1898183e4a650"),
    "agentv-real/runs/hooks-shared": ("7ba7807fa51eb23e", "52e6b1d99fb1c6cb", "e1748916f3d33af1"),
    "agentv-real/runs/hooks-test-first": ("90c63e4543548cb0", "f813a4ddeec2b53a", "e9cfac22881e74b8"),
    "agentv-real/runs/hooks-test-workspace": ("3251a84d5993952b", "59767c22fcf916ca", "4a66b65fc24c58aa"),
    "agentv-real/runs/judge-fails": ("e555a486e0a806ce", "1019b4c9661f19ab", "a070fc3f8b78fb52"),
    "agentv-real/runs/text-and-files": ("4f2a00441bc5fd46", "23a0e02c9d8a5b7d", "fc2e55ffd8931d6d"),
    "agentv-real/runs/workspace": ("25c962b73f9ff829", "6eaa7df61b5fac9a", "ed098027348f2fcb"),
    "handmade/v4-run": ("bd9579a7c414f955", "fca908cae971da43", "613b43eab52acb57"),
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
