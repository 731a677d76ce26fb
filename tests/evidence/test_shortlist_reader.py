"""The one reading of a cited shortlist: a good file into its typed record, a bad key named with
what it must be and the command that writes a good one."""

from __future__ import annotations

import json
from pathlib import Path

from reviewkit.cli.shortlisting import build_shortlist, document
from reviewkit.evidence.files import SHORTLIST, read_cited
from reviewkit.evidence.shortlist import read_shortlist

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_a_shortlist_reads_into_its_record_and_a_bad_key_is_named(tmp_path):
    sl = build_shortlist("Llama-3-8B", 2, 256, 10.0, [SAMPLES / "gpu-quick-h200"],
                         output_tokens=8, platforms="h200-sxm,tpu-v5e")  # fmt: skip
    good = tmp_path / "good.json"
    doc = document(sl)
    good.write_text(json.dumps(doc))
    bad_doc = json.loads(json.dumps(doc))
    bad_doc["candidates"][0]["rank"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(bad_doc))
    (record,), not_used = read_cited([good, bad], SHORTLIST, read_shortlist)
    assert (record.model, record.batch, record.context, record.output_tokens) == (
        "Llama-3-8B", 2, 256, 8)  # fmt: skip
    assert [r.key for r in record.rows] == [c["key"] for c in doc["candidates"]]
    first = record.rows[0]
    assert first.latency_s == doc["candidates"][0]["latency_s"]["value"]
    assert first.risk == doc["candidates"][0]["risk"]
    ((path, why),) = not_used
    assert path == bad
    assert why == ("`candidates[0].rank` must be a whole number, 1 or more; re-run "
                   "`reviewkit shortlist`")
