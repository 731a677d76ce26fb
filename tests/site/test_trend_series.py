"""Site trend series are keyed by the device fingerprint, under its label."""

from __future__ import annotations

import json

from runfactory import make_run

from reviewkit.site.build import _trend_rows


def _with_fingerprint(folder, fp_hash, label):
    path = folder / "run.json"
    doc = json.loads(path.read_text())
    doc["environment"]["fingerprint"] = {"hash": fp_hash, "label": label, "facts": {}}
    path.write_text(json.dumps(doc))


def test_two_machines_of_one_name_are_two_series(tmp_path):
    decision = tmp_path / "d"
    zen5 = "AMD EPYC · Zen 5 · AVX-512 BF16 · 2 cores"
    for name, fp_hash, label in (("zen3", "aaaaaa111", "AMD EPYC · Zen 3 · AVX2 · 2 cores"),
                                 ("zen5", "bbbbbb222", zen5), ("zen5b", "cccccc333", zen5),
                                 ("old", None, None)):  # fmt: skip
        make_run(decision / "runs" / name, knobs={"device_name": "AMD EPYC"})
        if fp_hash:
            _with_fingerprint(decision / "runs" / name, fp_hash, label)
    series = {r["series"] for r in _trend_rows([decision])["gemm"]}
    assert series == {
        "AMD EPYC · Zen 3 · AVX2 · 2 cores · fp32 · 2 threads",
        # one label, two fingerprints (a Zen 5 with more memory, say): the hash tells them apart
        "AMD EPYC · Zen 5 · AVX-512 BF16 · 2 cores [bbbbbb] · fp32 · 2 threads",
        "AMD EPYC · Zen 5 · AVX-512 BF16 · 2 cores [cccccc] · fp32 · 2 threads",
        "AMD EPYC · fp32 · 2 threads",  # recorded before fingerprints: by name
    }
