"""Every export format writes, byte for byte, what it wrote before its reading and row building were
made faster (issue 31): the SHA-256 (first 16 hex digits) of each format's output for every AgentV run
under ``tests/fixtures/`` that imports, the repository's path in it written as ``<repo>``. The digests were
taken from main before that work. An export's bytes are what a user's scripts and diffs see: a change
that alters them on purpose must say so here, with the new digests (:func:`digests` gives them). Each run is
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
    "agentv/v4/rubric/dataset.eval.baseline.jsonl": ("485e7133f159ebe5", "2eb8301e6d896c37", "d7a3e024a863ae87"),
    "agentv/v5-next/runs/2026-07-06T01-06-18-244Z": ("78b19b9e609cc63d", "fb735d433528afdc", "2d8f54e608e1265e"),
    "agentv-agent-runs/runs/claude-skill-trigger": ("f8c97674c504225b", "c966689cafe428a1", "128bea3999d2ecad"),
    "agentv-agent-runs/runs/copilot-skill-trigger": ("1687c2e6d3381b58", "1fdfd62ad1046172", "7f22e6148e9f836f"),
    "agentv-agent-runs/runs/pi-skill-trigger": ("a09aac1a50e3bbba", "ef0b377ec5ceed42", "9d76b4d3fa7373c5"),
    "agentv-example-runs/runs/assert": ("26824a612d4d500d", "59302dd38b2aaec7", "978f26413841fd54"),
    "agentv-example-runs/runs/basic": ("eff3f22d5139560c", "439845d0678a9311", "cc199206c909c078"),
    "agentv-example-runs/runs/composite": ("5cb6b0790c9ccfc7", "d6fd4c31e034bed8", "a6c821838adf1b38"),
    "agentv-example-runs/runs/execution-metrics": ("a6fd594153bfde2e", "9777ad381cfb69e9", "5545314e5a34c259"),
    "agentv-example-runs/runs/external-datasets": ("b086819b548da101", "5e37b4bd0c53fde9", "27f2a116da49873d"),
    "agentv-example-runs/runs/file-changes": ("be725208c9b697c4", "d8b12d93f64643fd", "6468faf4dd34a2c4"),
    "agentv-example-runs/runs/local-cli": ("6b6e8986e39288ca", "0a6c6ad95087cc09", "58166ac92e29f950"),
    "agentv-example-runs/runs/multi-turn-conversation": ("33f827862489bc11", "64c71c9cd6df419e", "8a137c38bc035928"),
    "agentv-example-runs/runs/multi-turn-conversation-live": (
        "8a445c325d0e1561",
        "76d7cdaa8e36c540",
        "34dfa9b2265c703a",
    ),
    "agentv-example-runs/runs/rubric": ("1030ef90df46227f", "4d27d5fed73daa8b", "4675d1f5213b2073"),
    "agentv-example-runs/runs/threshold-grader": ("05b7ea6ca33bee8e", "1f06e18e6a33e5e3", "bf7373f89a603a8b"),
    "agentv-example-runs/runs/tool-trajectory-advanced": ("b2db50b5676b1384", "b6df2bb526cce26b", "6d43aa968928a07e"),
    "agentv-example-runs/runs/tool-trajectory-simple": ("546ee5d1f98a4caf", "4368649c6dc36aba", "e17f36dfec90ea4d"),
    "agentv-example-runs/runs/trials": ("f4937c3650122e64", "096675bbbf0abc50", "0f907aa215b77d2a"),
    "agentv-example-runs/runs/weighted-graders": ("527f0490f9d5f7b8", "3aba243a4d933a10", "de52f71d1155ac21"),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-01T10-00-00-000Z": (
        "be7fc47fc71854a8",
        "13e614a83cb56a59",
        "d3f626d825b269de",
    ),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-08T10-00-00-000Z": (
        "da8f4f4d4ed669ca",
        "fdc0a18e958c0cf2",
        "abd148a00f37d641",
    ),
    "agentv-examples-4.42.4/examples/features/trend/sample-runs/2026-03-15T10-00-00-000Z": (
        "31e4f1ed669ec73d",
        "36f9e0bef23c6975",
        "e47aa42685ba89d4",
    ),
    "agentv-graders/runs/metrics": ("b9a526256c038a14", "3daa77e5c9fcc75c", "8aa8c7d911522317"),
    "agentv-graders/runs/structured": ("7fd4abd9d5473330", "c74f05c31bdb8209", "8da687b836a7a8cc"),
    "agentv-graders/runs/trajectory": ("003b051a6e964c3a", "e0de632e3b3c496e", "ebd42bb6b86aaa15"),
    "agentv-newuser-runs/runs/deterministic-graders": ("58bae950fe3f5772", "663241824e83f42f", "1d03ca1046aa6000"),
    "agentv-newuser-runs/runs/input-files-shorthand": ("22c1471f68e7167b", "2b53152fb990f9b2", "f0d6955d1b57a120"),
    "agentv-newuser-runs/runs/matrix-evaluation": ("87acf6284f8aa042", "4d755ca08e799a05", "1b57aaf92811b24c"),
    "agentv-newuser-runs/runs/matrix-evaluation-targets": ("17bc45ef346c30c9", "078ea67c5e00b0c2", "d636eedd145af095"),
    "agentv-newuser-runs/runs/suite-level-input-files": ("2321a8e140713838", "04836b3c471d00ed", "c69cc000a864f2ff"),
    "agentv-newuser-runs/runs/test-vars-templating": ("fc0d9234d651a813", "7f07c54968f90390", "ed1cfb867db67abe"),
    "agentv-newuser-runs/runs/trial-output-consistency": ("d4a8eadc2e24b363", "e170438c86248e20", "dc613a8fd48f44f2"),
    "agentv-newuser2/runs/bad-regex": ("3fc127f52c3b5f89", "e7bb280e1e231531", "b14bc6fdec29a121"),
    "agentv-newuser2/runs/extract": ("13bbcabf06f2063f", "d23234bfdd0fd83f", "0f46610ee8187cc1"),
    "agentv-newuser2/runs/ranges": ("09fa3533538704c3", "22e91cbe812d70ff", "2b6db89a568cdb8e"),
    "agentv-newuser2/runs/review": ("33ff50d363a27f0b", "a01744f38326cc6f", "d49cf877d7b29a4f"),
    "agentv-newuser2/runs/support": ("9f9ab6b3b8e1e448", "a43867097245405c", "3e798fabf0570b03"),
    "agentv-newuser2/trials-mean/run": ("b3ee3981ddd3bb99", "5e53a03e9f443411", "bea6150b5e7c42ae"),
    "agentv-real/runs/hooks-fail": ("ec55bec9135c2aee", "fda7d79737fbca71", "8bc6846e6056a7ff"),
    "agentv-real/runs/hooks-fail-all": ("feb793fab72f9ada", "6b3e3395b68d1f57", "4f29a46ac3ad3368"),
    "agentv-real/runs/hooks-only": ("ab63ab4a2c030b6e", "f0e6113e1589c557", "f61a1cf0c1923409"),
    "agentv-real/runs/hooks-per-test": ("2c4f52bf41c7d9a7", "8c4f54cad388fae8", "2fff17867ae66467"),
    "agentv-real/runs/hooks-shared": ("7ba7807fa51eb23e", "52e6b1d99fb1c6cb", "ac353be8b606c59e"),
    "agentv-real/runs/hooks-test-first": ("90c63e4543548cb0", "f813a4ddeec2b53a", "3f47ec99c1fcaba4"),
    "agentv-real/runs/hooks-test-workspace": ("3251a84d5993952b", "59767c22fcf916ca", "981f2875ae22741a"),
    "agentv-real/runs/judge-fails": ("e555a486e0a806ce", "1019b4c9661f19ab", "10e8138492534d00"),
    "agentv-real/runs/text-and-files": ("4f2a00441bc5fd46", "23a0e02c9d8a5b7d", "339583be734c8554"),
    "agentv-real/runs/workspace": ("25c962b73f9ff829", "6eaa7df61b5fac9a", "f3db3de2a679f772"),
    "handmade/v4-run": ("bd9579a7c414f955", "fca908cae971da43", "2b522acf4b709b62"),
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
