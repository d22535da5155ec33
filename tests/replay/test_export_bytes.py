"""Every export format writes, byte for byte, what it wrote before its reading and row building were
made faster (issue 31): the SHA-256 (first 16 hex digits) of each format's output for every AgentV run
under ``tests/fixtures/`` that imports, the repository's path in it written as ``<repo>``. The digests were
taken from main before that work. An export's bytes are what a user's scripts and diffs see: a change
that alters them on purpose must say so here, with the new digests (:func:`digests` gives them): the JSON
document's version 2 (each result's ``experiment``) changed every ``json`` digest, and nothing else. Each run is
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
    "agentv/v4/rubric/dataset.eval.baseline.jsonl": ("485e7133f159ebe5", "2eb8301e6d896c37", "47eab87279362d86"),
    "agentv/v5-next/runs/2026-07-06T01-06-18-244Z": ("78b19b9e609cc63d", "fb735d433528afdc", "173229947ed6936e"),
    "agentv-agent-runs/runs/claude-skill-trigger": ("f8c97674c504225b", "c966689cafe428a1", "3c7a72eae4880eb6"),
    "agentv-agent-runs/runs/copilot-skill-trigger": ("1687c2e6d3381b58", "1fdfd62ad1046172", "b856138c13581643"),
    "agentv-agent-runs/runs/pi-skill-trigger": ("a09aac1a50e3bbba", "ef0b377ec5ceed42", "05116c25f956889d"),
    "agentv-example-runs/runs/assert": ("26824a612d4d500d", "59302dd38b2aaec7", "4591f741a41670f9"),
    "agentv-example-runs/runs/basic": ("eff3f22d5139560c", "439845d0678a9311", "ddee1a622945f8c6"),
    "agentv-example-runs/runs/composite": ("5cb6b0790c9ccfc7", "d6fd4c31e034bed8", "cf9abf41406edc1b"),
    "agentv-example-runs/runs/execution-metrics": ("a6fd594153bfde2e", "9777ad381cfb69e9", "216b2abc411bffb4"),
    "agentv-example-runs/runs/external-datasets": ("b086819b548da101", "5e37b4bd0c53fde9", "567f3a58d2af2ec9"),
    "agentv-example-runs/runs/file-changes": ("be725208c9b697c4", "d8b12d93f64643fd", "d2bf4b7253de7b21"),
    "agentv-example-runs/runs/local-cli": ("6b6e8986e39288ca", "0a6c6ad95087cc09", "e537b9edac310a0e"),
    "agentv-example-runs/runs/multi-turn-conversation": ("33f827862489bc11", "64c71c9cd6df419e", "ecf790b9ce4cbf1e"),
    "agentv-example-runs/runs/multi-turn-conversation-live": (
        "8a445c325d0e1561",
        "76d7cdaa8e36c540",
        "217931336814b981",
    ),
    "agentv-example-runs/runs/rubric": ("1030ef90df46227f", "4d27d5fed73daa8b", "8baa72c7fe8dd1c0"),
    "agentv-example-runs/runs/threshold-grader": ("05b7ea6ca33bee8e", "1f06e18e6a33e5e3", "1219043bae091bd4"),
    "agentv-example-runs/runs/tool-trajectory-advanced": ("b2db50b5676b1384", "b6df2bb526cce26b", "96160bba4445059e"),
    "agentv-example-runs/runs/tool-trajectory-simple": ("546ee5d1f98a4caf", "4368649c6dc36aba", "d4e30b820ef8358a"),
    "agentv-example-runs/runs/trials": ("f4937c3650122e64", "096675bbbf0abc50", "eec15f8b102bb82c"),
    "agentv-example-runs/runs/weighted-graders": ("527f0490f9d5f7b8", "3aba243a4d933a10", "25acaf90d6f2ce07"),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-01T10-00-00-000Z": (
        "be7fc47fc71854a8",
        "13e614a83cb56a59",
        "011deffd49a4d2a6",
    ),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-08T10-00-00-000Z": (
        "da8f4f4d4ed669ca",
        "fdc0a18e958c0cf2",
        "97e2ab1a52f3b4b8",
    ),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-15T10-00-00-000Z": (
        "31e4f1ed669ec73d",
        "36f9e0bef23c6975",
        "c709cb066aa2ee4f",
    ),
    "agentv-graders/runs/metrics": ("b9a526256c038a14", "3daa77e5c9fcc75c", "85d3ef90cd0abd24"),
    "agentv-graders/runs/structured": ("7fd4abd9d5473330", "c74f05c31bdb8209", "260570d713325601"),
    "agentv-graders/runs/trajectory": ("003b051a6e964c3a", "e0de632e3b3c496e", "4e74678541864df2"),
    "agentv-newuser-runs/runs/deterministic-graders": ("58bae950fe3f5772", "663241824e83f42f", "9183251062dd7c6e"),
    "agentv-newuser-runs/runs/input-files-shorthand": ("22c1471f68e7167b", "2b53152fb990f9b2", "585e3ea8ad413cb7"),
    "agentv-newuser-runs/runs/matrix-evaluation": ("87acf6284f8aa042", "4d755ca08e799a05", "ef796497ea91f256"),
    "agentv-newuser-runs/runs/matrix-evaluation-targets": ("17bc45ef346c30c9", "078ea67c5e00b0c2", "7ed787a5a46808cf"),
    "agentv-newuser-runs/runs/suite-level-input-files": ("2321a8e140713838", "04836b3c471d00ed", "600a4169c30e7152"),
    "agentv-newuser-runs/runs/test-vars-templating": ("fc0d9234d651a813", "7f07c54968f90390", "4450fa7d0f268273"),
    "agentv-newuser-runs/runs/trial-output-consistency": ("d4a8eadc2e24b363", "e170438c86248e20", "5e31afa320986768"),
    "agentv-newuser2/runs/bad-regex": ("3fc127f52c3b5f89", "e7bb280e1e231531", "7c727a34c9b65709"),
    "agentv-newuser2/runs/extract": ("13bbcabf06f2063f", "d23234bfdd0fd83f", "23d7b41994642f6e"),
    "agentv-newuser2/runs/ranges": ("09fa3533538704c3", "22e91cbe812d70ff", "4f6079df017f337b"),
    "agentv-newuser2/runs/review": ("33ff50d363a27f0b", "a01744f38326cc6f", "01d5c80da074c7d5"),
    "agentv-newuser2/runs/support": ("9f9ab6b3b8e1e448", "a43867097245405c", "14a41edcab267dd1"),
    "agentv-newuser2/trials-mean/run": ("b3ee3981ddd3bb99", "5e53a03e9f443411", "20e00456263dd532"),
    "agentv-real/runs/hooks-fail": ("ec55bec9135c2aee", "fda7d79737fbca71", "127bbd32e9696dcc"),
    "agentv-real/runs/hooks-fail-all": ("feb793fab72f9ada", "6b3e3395b68d1f57", "a9daf0a6d9acb890"),
    "agentv-real/runs/hooks-only": ("ab63ab4a2c030b6e", "f0e6113e1589c557", "cdef9aad83638519"),
    "agentv-real/runs/hooks-per-test": ("2c4f52bf41c7d9a7", "8c4f54cad388fae8", "50f270a1a27d4c7a"),
    "agentv-real/runs/hooks-shared": ("7ba7807fa51eb23e", "52e6b1d99fb1c6cb", "646e9bed9b1416f8"),
    "agentv-real/runs/hooks-test-first": ("90c63e4543548cb0", "f813a4ddeec2b53a", "ad61c7fed01405b8"),
    "agentv-real/runs/hooks-test-workspace": ("3251a84d5993952b", "59767c22fcf916ca", "70628798ea205912"),
    "agentv-real/runs/judge-fails": ("e555a486e0a806ce", "1019b4c9661f19ab", "4feb6e6a3e38b831"),
    "agentv-real/runs/text-and-files": ("4f2a00441bc5fd46", "23a0e02c9d8a5b7d", "3d4a8ccea5614ee1"),
    "agentv-real/runs/workspace": ("25c962b73f9ff829", "6eaa7df61b5fac9a", "93fd8eec03b515d2"),
    "handmade/v4-run": ("bd9579a7c414f955", "fca908cae971da43", "4cda333caa6c3360"),
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
