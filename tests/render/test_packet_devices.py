"""A review whose candidate ran on another device (a CPU baseline against an H200): what the
packet says first, and the defects seen in such a packet's pages (a CPU-to-H200 review of the
committed samples, 2026-12-04)."""

import json

import html5lib
import pytest
from runfactory import complete_review, write_review

from reviewkit.render.packet import write_packet
from reviewkit.render.packet.shapes import _family

pytestmark = pytest.mark.usefixtures("weasyprint_warnings_fail")

GPU = {"device": "cuda", "device_name": "NVIDIA H200"}


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    root = tmp_path_factory.mktemp("devices")
    review = complete_review()
    # the primary metric named by its evidence's fragment: a gemm, not the end-to-end model
    review["answers"]["primary-metric"] = {
        "answer": "median latency of the FFN up-projection at batch 4",
        "evidence": "runs/cand/run.json#gemm.toy-ffn-up.b4s512.bf16",
    }
    path = write_review(root / "review", review, cand_kw={"knobs": GPU})
    result = write_packet(path, root / "out", pdf=False)
    return json.loads(result.json.read_text()), result.html.read_text()


def test_the_brief_says_the_runs_come_from_different_devices(two_devices, tmp_path):
    doc, page = two_devices
    said = doc["brief"]["devices"]
    assert said.startswith("Runs from different devices: the baseline on Test CPU; ")
    assert "candidate on NVIDIA H200" in said and "its own device's ceilings" in said
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    note = tree.find(".//section[@id='brief']//p[@class='devices-note']")
    assert note is not None and "NVIDIA H200" in "".join(note.itertext())
    # one device: nothing said
    same = write_review(tmp_path / "review", complete_review())
    alone = json.loads(write_packet(same, tmp_path / "out", pdf=False).json.read_text())
    assert alone["brief"]["devices"] == ""


def test_the_primary_metric_is_the_workload_its_answer_names(two_devices):
    headline = two_devices[0]["brief"]["headline"]
    # before: the first model workload, whatever the answer cited
    assert headline["label"] == "median latency of gemm.toy-ffn-up.b4s512"
    # the toy candidate runs every workload 2.5x faster (runfactory): ratio 1 / 2.5
    assert headline["ratio"] == pytest.approx(0.4, rel=0.05)


def test_reproducible_slices_name_a_runs_knobs_once(two_devices):
    _, page = two_devices
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    claim = tree.find(".//section[@id='claim']")
    runs = claim.findall(".//p[@class='slice-run']")
    assert len(runs) == 1
    text = " ".join("".join(runs[0].itertext()).split())
    assert "runs/cand" in text and "device = cuda" in text
    for table in claim.findall(".//table[@class='t-slices']"):
        assert [th.text for th in table.findall(".//th")] == ["Workload", "Reproduce"]


def test_shape_panels_keep_a_dtype_apart():
    # runs compared id by id over several dtypes drew three cells, and three labels, in one place
    assert _family("gemm.bert-base-ffn-up.b1s128.fp32") == "gemm · bert-base-ffn-up · fp32"
    assert _family("gemm.bert-base-ffn-up.b1s128.bf16") == "gemm · bert-base-ffn-up · bf16"
    # a key paired across dtypes has none, and one panel per operator as before
    assert _family("gemm.toy-ffn-up.b1s128") == "gemm · toy-ffn-up"


def test_a_forest_taller_than_a_page_is_split_into_parts_that_share_an_axis():
    from reviewkit.render.packet import figures

    # 96 workloads, all compared (the CPU-to-H200 review): one chart ran off its A4 page
    rows = [{"workload": f"w{i:02d}", "ratio": 0.001 * 1.07**i, "low": 0.0009 * 1.07**i,
             "high": 0.0011 * 1.07**i, "verdict": "faster"} for i in range(96)]  # fmt: skip
    parts = figures._split_forest(rows, {"margin": 0.05})
    assert list(parts) == ["forest_workloads", "forest_workloads_2"]
    domains, shown = [], []
    for n, spec in enumerate(parts.values()):
        layer = next(x for x in spec["layer"] if x["encoding"]["x"].get("scale"))
        domains.append(layer["encoding"]["x"]["scale"]["domain"])
        names = {r["workload"] for d in spec["datasets"].values() for r in d if "workload" in r}
        shown.append(names)
        first, last = (1, 48) if n == 0 else (49, 96)
        assert f"(workloads {first}-{last} of 96, fastest first)" in spec["title"]["text"]
    assert domains[0] == domains[1]
    # ratio order: the first part holds the 48 fastest (smallest ratios), the second the rest
    assert shown[0] == {f"w{i:02d}" for i in range(48)}
    assert shown[1] == {f"w{i:02d}" for i in range(48, 96)}
    assert list(figures._split_forest(rows[:48], {})) == ["forest_workloads"]
