"""A production slice: production's own op shapes from trace summaries, a workload set to measure.

Torch-free. Each shape a trace summary lists (its op, Input Dims and Input type, count and time)
is reproduced, where the op is one the suite's kernels run, as a workload definition with the
suite's own FLOP and byte conventions (suite/workloads.py's docstring), then the shapes are
taken by production time until they cover `cover` of the time the slice can reproduce, or
`max_workloads` of them. What cannot be reproduced here is listed by reason, with its time:
collectives (their time is another world size's and its links'), operators recorded without
Input Dims (backward operators record none), ops from libraries outside torch (fbgemm_gpu),
dtypes and ops the suite has no kernel for. `reviewkit run --slice FILE` measures the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.common.hashing import sha256_json
from reviewkit.suite.definitions import ELEMENT_BYTES, TensorSpec, WorkloadSpec
from reviewkit.suite.workloads import (
    ADD_FLOPS_PER_ELEMENT,
    GELU_FLOPS_PER_ELEMENT,
    LAYER_NORM_FLOPS_PER_ELEMENT,
    RMS_NORM_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    SUM_FLOPS_PER_ELEMENT,
)

KIND = "reviewkit.production_slice"
SCHEMA_VERSION = 1
# Issue 35's target: the slice covers 90% of the time of the ops it can reproduce locally.
DEFAULT_COVER = 0.9
# A slice is measured like a profile: at the quick profile's budget a workload takes seconds,
# so 64 keeps a slice run within minutes on a CPU; the cap, when it bites, is said.
DEFAULT_MAX_WORKLOADS = 64
SOURCE_MODEL = "production slice"
# The profiler's Input type names for the dtypes the suite measures.
TORCH_TYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16"}

# Why production time is not in a slice: one category each, the ops behind it as examples.
COLLECTIVE = "collectives: their time is their world size's and links', not one device's"
NO_SHAPES = ("operators recorded without Input Dims (backward operators record none; profile "
             "with record_shapes=True)")
OUTSIDE_TORCH = "ops from libraries outside torch (fbgemm_gpu, ...): no suite kernel runs them"
NO_REPRODUCER = "ops no suite kernel reproduces"
UNSUPPORTED_DTYPE = "dtypes the suite does not measure (it measures fp32, bf16, fp16)"
SHAPE_MISMATCH = "shapes the op's suite kernel cannot take (broadcasts, matrix-vector, ...)"
NOT_LISTED = "shapes past the summary's top list per layer type"
NOT_LINKED = "device time launched outside every mapped operator (no shape to put it on)"
UNMAPPED = "ops the layer map does not map"
OVER_CAP = "reproducible, past the slice's cap of workloads"
UNDER_COVER = "reproducible, past the share of reproducible time the slice covers"
EXAMPLES = 5  # ops named per category, by time


@dataclass(frozen=True)
class Reproduced:
    """A production shape as a suite workload, or None and the reason it is not one."""

    spec: WorkloadSpec | None
    reason: str = ""  # the category
    detail: str = ""  # what of the op put it there


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _dtype(types: Sequence[str] | None) -> str | None:
    first = types[0] if types else None
    return TORCH_TYPES.get(first) if isinstance(first, str) else None


def _tag(shapes: Iterable[Sequence[int]]) -> str:
    return "_".join("x".join(map(str, s)) for s in shapes)


def _slug(op: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", op.lower()).strip("-")


def _spec(layer_type: str, kernel: str, op: str, dtype: str, inputs: tuple[TensorSpec, ...],
          params: dict, matmul_flops: int, other_flops: int, out_numel: int,
          extra_bytes: int = 0) -> WorkloadSpec:  # fmt: skip
    nbytes = sum(t.nbytes for t in inputs) + out_numel * ELEMENT_BYTES[dtype] + extra_bytes
    return WorkloadSpec(
        id=f"{layer_type}.slice-{_slug(op)}.{_tag(t.shape for t in inputs)}.{dtype}",
        layer_type=layer_type, kernel=kernel, source_model=SOURCE_MODEL, dtype=dtype,
        inputs=inputs, params={"op": op, **params}, matmul_flops=matmul_flops,
        other_flops=other_flops, bytes=nbytes,
    )  # fmt: skip


def _gemm(op: str, dtype: str, m: int, k: int, n: int) -> WorkloadSpec:
    x, w = TensorSpec((m, k), dtype), TensorSpec((n, k), dtype)
    return _spec("gemm", "linear", op, dtype, (x, w), {"m": m, "k": k, "n": n},
                 2 * m * k * n, 0, m * n)  # fmt: skip


def _bmm(op: str, dtype: str, b: int, m: int, k: int, n: int) -> WorkloadSpec:
    a, bt = TensorSpec((b, m, k), dtype), TensorSpec((b, k, n), dtype)
    return _spec("gemm", "bmm", op, dtype, (a, bt), {"b": b, "m": m, "k": k, "n": n},
                 2 * b * m * k * n, 0, b * m * n)  # fmt: skip


def _vector(layer_type: str, kernel: str, op: str, dtype: str, shape: Sequence[int],
            flops_per_element: int, extra: tuple[TensorSpec, ...] = (),
            out_numel: int | None = None, params: dict | None = None) -> WorkloadSpec:  # fmt: skip
    x = TensorSpec(tuple(shape), dtype)
    out = x.numel if out_numel is None else out_numel
    return _spec(layer_type, kernel, op, dtype, (x, *extra),
                 {"shape": list(shape), **(params or {})}, 0, flops_per_element * x.numel, out)


def _mismatch(op: str, why: str) -> Reproduced:
    return Reproduced(None, SHAPE_MISMATCH, f"{op}: {why}")


# The ops `reproduce` knows, by their aten name.
KNOWN_OPS = ("linear", "addmm", "mm", "matmul", "bmm", "scaled_dot_product_attention",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "layer_norm", "rms_norm", "softmax", "_softmax", "gelu", "add", "add_", "sum",
             "embedding")  # fmt: skip


def reproduce(op: str, layer_type: str, dims: Sequence, types: Sequence | None) -> Reproduced:
    """The suite workload that runs `op` at these Input Dims and Input type, or why none."""
    if layer_type == "collective":
        return Reproduced(None, COLLECTIVE, op)
    ns = op.split("::", 1)[0] if "::" in op else ""
    if ns not in ("aten", ""):
        return Reproduced(None, OUTSIDE_TORCH, op)
    if op.removeprefix("aten::") not in KNOWN_OPS:
        return Reproduced(None, NO_REPRODUCER, op)
    dtype = _dtype(types)
    if dtype is None:
        first = types[0] if types else None
        return Reproduced(None, UNSUPPORTED_DTYPE, f"{op}: {first or 'no type recorded'}")
    shapes = [tuple(d) if isinstance(d, list) else () for d in dims]
    a = shapes[0] if shapes else ()
    b = shapes[1] if len(shapes) > 1 else ()
    name = op.removeprefix("aten::")
    if not a or any(x <= 0 for x in a):
        return _mismatch(op, "no first tensor, or an empty one")
    if name == "linear":
        if len(b) != 2 or a[-1] != b[1]:
            return _mismatch(op, f"input {list(a)} against weight {list(b)}")
        return Reproduced(_gemm(op, dtype, _numel(a[:-1]), a[-1], b[0]))
    if name == "addmm":
        c = shapes[2] if len(shapes) > 2 else ()
        if len(b) != 2 or len(c) != 2 or b[1] != c[0]:
            return _mismatch(op, f"{list(b)} x {list(c)}")
        return Reproduced(_gemm(op, dtype, b[0], b[1], c[1]))
    if name in ("mm", "matmul", "bmm"):
        if len(a) >= 2 and len(b) == 2 and a[-1] == b[0] and name != "bmm":
            return Reproduced(_gemm(op, dtype, _numel(a[:-1]), a[-1], b[1]))
        if len(a) >= 3 and len(a) == len(b) and a[:-2] == b[:-2] and a[-1] == b[-2]:
            return Reproduced(_bmm(op, dtype, _numel(a[:-2]), a[-2], a[-1], b[-1]))
        return _mismatch(op, f"{list(a)} x {list(b)}")
    if name in ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                "_scaled_dot_product_efficient_attention"):  # fmt: skip
        v = shapes[2] if len(shapes) > 2 else ()
        if len(a) != 4 or a != b or a != v:
            return _mismatch(op, "query, key and value of unequal or non-4-D shapes")
        batch, heads, seq, head_dim = a
        qkv = TensorSpec(a, dtype)
        # is_causal is a scalar argument the profiler does not record in Input Dims: the
        # slice measures the unmasked call, and says so in its params
        return Reproduced(_spec(
            "attention", "sdpa", op, dtype, (qkv, qkv, qkv),
            {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim, "causal": False,
             "mask": "not recorded: measured unmasked"},
            4 * batch * heads * head_dim * seq * seq, 0, _numel(a)))  # fmt: skip
    if name in ("layer_norm", "rms_norm"):
        d = a[-1]
        affine = tuple(TensorSpec((d,), dtype) for _ in range(2 if name == "layer_norm" else 1))
        per = LAYER_NORM_FLOPS_PER_ELEMENT if name == "layer_norm" else RMS_NORM_FLOPS_PER_ELEMENT
        return Reproduced(_vector("norm", name, op, dtype, a, per, affine))
    if name in ("softmax", "_softmax"):
        return Reproduced(_vector("softmax", "softmax", op, dtype, a, SOFTMAX_FLOPS_PER_ELEMENT,
                                  params={"dim": -1}))  # fmt: skip
    if name == "gelu":
        return Reproduced(_vector("elementwise", "gelu", op, dtype, a, GELU_FLOPS_PER_ELEMENT))
    if name in ("add", "add_"):
        if a != b:
            return _mismatch(op, f"a broadcast or scalar add ({list(a)} + {list(b)})")
        return Reproduced(_vector("elementwise", "add", op, dtype, a, ADD_FLOPS_PER_ELEMENT,
                                  (TensorSpec(a, dtype),)))  # fmt: skip
    if name == "sum":
        return Reproduced(_vector("reduction", "sum", op, dtype, a, SUM_FLOPS_PER_ELEMENT,
                                  out_numel=_numel(a[:-1]), params={"dim": -1}))  # fmt: skip
    if name == "embedding":
        # aten::embedding(weight, indices): the table first, then the ids
        if len(a) != 2 or not b:
            return _mismatch(op, f"table {list(a)}, ids {list(b)}")
        vocab, hidden = a
        ids_shape = (1, b[0]) if len(b) == 1 else (_numel(b[:-1]), b[-1])
        ids, table = TensorSpec(ids_shape, "int64"), TensorSpec((vocab, hidden), dtype)
        gathered = _numel(ids_shape) * hidden * ELEMENT_BYTES[dtype]
        spec = WorkloadSpec(
            id=f"embedding.slice-{_slug(op)}.{_tag((ids_shape, a))}.{dtype}",
            layer_type="embedding", kernel="embedding", source_model=SOURCE_MODEL, dtype=dtype,
            inputs=(ids, table),
            params={"op": op, "batch": ids_shape[0], "seq": ids_shape[1], "vocab": vocab,
                    "hidden": hidden},
            bytes=ids.nbytes + 2 * gathered,
        )  # fmt: skip
        return Reproduced(spec)
    return Reproduced(None, NO_REPRODUCER, op)  # a KNOWN_OPS name without a branch above


def _shape_time(shape: dict, device_basis: bool) -> float:
    t = shape.get("device_time_s") if device_basis else shape.get("time_s")
    return float(t) if isinstance(t, int | float) and math.isfinite(t) and t > 0 else 0.0


def _number(x: object) -> float:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) and x > 0 else 0.0


def _fail(path: str, key: str, expected: str) -> InputError:
    return InputError(f"{path}: `{key}` must be {expected}; re-import the trace with "
                      "`reviewkit trace import` (this version keeps each shape's op)")  # fmt: skip


@dataclass
class _Found:
    spec: WorkloadSpec
    dims: list  # as the trace recorded them, so the shape can be re-made in another dtype
    types: list
    count: int = 0
    time_s: float = 0.0


def derive(summaries: Sequence[tuple[str, dict]], cover: float = DEFAULT_COVER,
           max_workloads: int = DEFAULT_MAX_WORKLOADS) -> dict:  # fmt: skip
    """The slice document of trace summaries [(path, document)] (each checked by
    evidence/trace/diff.load_summary): its workloads by production time, what they cover, and
    what is left out by reason. Times are on each trace's own basis (device where it has
    device events, else host); the summaries must share one basis."""
    if not 0 < cover <= 1:
        raise InputError(f"--cover {cover}: expected a share in (0, 1]")
    if max_workloads < 1:
        raise InputError(f"--max-workloads {max_workloads}: expected at least 1")
    bases = {t["time_basis"] for _, doc in summaries for t in doc["traces"]}
    if len(bases) > 1:
        raise InputError("the summaries mix device-basis and host-basis traces (a GPU's and a "
                         "CPU's): derive a slice from one kind")  # fmt: skip
    device_basis = bases == {"device"}
    found: dict[str, _Found] = {}
    left: dict[str, dict[str, float]] = {}  # category -> {example: time}
    total_s = 0.0
    sources, devices = [], set()

    def leave(reason: str, example: str, time_s: float) -> None:
        if time_s > 0:
            ex = left.setdefault(reason, {})
            ex[example] = ex.get(example, 0.0) + time_s

    for path, doc in summaries:
        sources.append({"summary": path, "traces": [
            {k: t.get(k) for k in ("path", "sha256", "size_bytes", "rank", "world_size")}
            for t in doc["traces"]]})  # fmt: skip
        for i, t in enumerate(doc["traces"]):
            where = f"traces[{i}]"
            if not t.get("record_shapes"):
                raise InputError(f"{path}: {where} was recorded without shapes, so no slice can "
                                 "be derived from it: profile with torch.profiler.profile("
                                 "record_shapes=True) and import the new trace")  # fmt: skip
            for dev in (t.get("device") or {}).get("devices") or []:
                if isinstance(dev, dict) and dev.get("name"):
                    devices.add(str(dev["name"]))
            shapes = t.get("shapes")
            if not isinstance(shapes, dict):
                raise _fail(path, f"{where}.shapes", "an object of layer types")
            trace_s = float(t["op_mix"]["time_s"])
            total_s += trace_s
            placed = 0.0  # time put on a shape, an unshaped operator or a listed remainder
            for layer, entry in sorted(shapes.items()):
                entry = entry if isinstance(entry, dict) else {}
                for j, shape in enumerate(entry.get("shapes") or []):
                    if not isinstance(shape, dict) or not isinstance(shape.get("op"), str):
                        raise _fail(path, f"{where}.shapes.{layer}.shapes[{j}].op", "a string")
                    time_s = _shape_time(shape, device_basis)
                    placed += time_s
                    r = reproduce(shape["op"], layer, shape.get("dims") or [], shape.get("types"))
                    if r.spec is None:
                        leave(r.reason, r.detail, time_s)
                        continue
                    f = found.setdefault(r.spec.id, _Found(r.spec, shape.get("dims") or [],
                                                            list(shape.get("types") or [])))
                    f.count += int(shape.get("count") or 0)
                    f.time_s += time_s
                unshaped = _number(entry.get("unshaped_device_time_s" if device_basis
                                             else "unshaped_time_s"))  # fmt: skip
                other = _number((entry.get("other_shapes") or {}).get(
                    "device_time_s" if device_basis else "time_s"))  # fmt: skip
                leave(COLLECTIVE if layer == "collective" else NO_SHAPES, layer, unshaped)
                leave(NOT_LISTED, layer, other)
                placed += unshaped + other
            if device_basis:
                # kernels launched outside every mapped operator (under an unmapped one, or a
                # backward thread's autograd node): on no shape
                leave(NOT_LINKED, "(device events)", trace_s - placed)
            else:
                unmapped = t["op_mix"]["unmapped"]
                leave(UNMAPPED, "(host operators)", _number(unmapped.get("time_s")))
                # inclusive times of outermost mapped operators sum to the mapped self time;
                # any rounding remainder is not put anywhere
    # a shape that took no time on the basis (a host op that launched nothing) is not a workload
    ranked = sorted((f for f in found.values() if f.time_s > 0),
                    key=lambda f: (-f.time_s, f.spec.id))  # fmt: skip
    reproducible_s = sum(f.time_s for f in ranked)
    chosen: list[_Found] = []
    covered_s = 0.0
    for f in ranked:
        if reproducible_s and covered_s >= cover * reproducible_s:
            leave(UNDER_COVER, f.spec.id, f.time_s)
        elif len(chosen) >= max_workloads:
            leave(OVER_CAP, f.spec.id, f.time_s)
        else:
            chosen.append(f)
            covered_s += f.time_s

    def share(x: float) -> float:
        return x / total_s if total_s > 0 else 0.0

    workloads = [{**f.spec.definition(),
                  "production": {"count": f.count, "time_s": f.time_s,
                                 "share_of_production": share(f.time_s), "op": f.spec.params["op"],
                                 "layer_type": f.spec.layer_type, "dims": f.dims,
                                 "types": f.types}}
                 for f in chosen]  # fmt: skip
    not_reproduced = [
        {"reason": reason, "time_s": sum(ex.values()),
         "share_of_production": share(sum(ex.values())),
         "examples": [{"name": n, "time_s": v} for n, v in
                      sorted(ex.items(), key=lambda kv: -kv[1])[:EXAMPLES]]}
        for reason, ex in left.items()]  # fmt: skip
    not_reproduced.sort(key=lambda r: -r["time_s"])
    return {
        "kind": KIND, "schema_version": SCHEMA_VERSION,
        "hash": sha256_json(workloads)[:16],
        "time_basis": "device" if device_basis else "host",
        "sources": sources, "source_devices": sorted(devices),
        "cover": cover, "max_workloads": max_workloads,
        "coverage": {
            "production_time_s": total_s, "reproducible_time_s": reproducible_s,
            "covered_time_s": covered_s,
            "share_of_reproducible": covered_s / reproducible_s if reproducible_s else 0.0,
            "share_of_production": share(covered_s),
            "reproducible_share_of_production": share(reproducible_s),
        },
        "not_reproduced": not_reproduced,
        "workloads": workloads,
    }  # fmt: skip


@dataclass(frozen=True)
class SliceSet:
    """A slice file read for measuring: its workloads and what a run records of it."""

    path: Path
    specs: tuple[WorkloadSpec, ...]
    identity: dict  # hash, time basis, sources, source devices, coverage
    production: tuple[dict, ...] = ()  # each workload's production record: op, dims, types

    def in_dtype(self, i: int, dtype: str) -> WorkloadSpec | None:
        """Workload i re-made at its recorded shapes in another dtype (a lower-precision
        rollout measured on production's shapes); None where that cannot be done."""
        spec = self.specs[i]
        if spec.dtype == dtype:
            return spec
        prod = self.production[i] if i < len(self.production) else {}
        if not prod.get("dims") or not prod.get("op"):
            return None
        torch_name = next(k for k, v in TORCH_TYPES.items() if v == dtype)
        types = [torch_name if t in TORCH_TYPES else t for t in prod.get("types") or []]
        return reproduce(prod["op"], prod.get("layer_type", spec.layer_type), prod["dims"],
                         types).spec  # fmt: skip


def load_slice(path: Path) -> SliceSet:
    """A slice file's workloads as suite definitions; the error names the file and the key."""
    import json

    def fail(key: str, expected: str) -> InputError:
        return InputError(f"{path}: `{key}` must be {expected}; derive the slice again with "
                          "`reviewkit trace slice`")  # fmt: skip

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc}); pass the file "
                         "`reviewkit trace slice --out` wrote") from exc  # fmt: skip
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not JSON ({type(exc).__name__}); pass the file "
                         "`reviewkit trace slice --out` wrote") from exc  # fmt: skip
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise fail("kind", f'"{KIND}"')
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise fail("schema_version", f"{SCHEMA_VERSION} (this reviewkit's)")
    rows = doc.get("workloads")
    if not isinstance(rows, list) or not rows:
        raise fail("workloads", "a non-empty list")
    specs, production = [], []
    for i, w in enumerate(rows):
        try:
            inputs = tuple(TensorSpec(tuple(int(x) for x in t["shape"]), str(t["dtype"]))
                           for t in w["inputs"])  # fmt: skip
            spec = WorkloadSpec(
                id=str(w["id"]), layer_type=str(w["layer_type"]), kernel=str(w["kernel"]),
                source_model=str(w["source_model"]), dtype=str(w["dtype"]), inputs=inputs,
                params=dict(w["params"]), matmul_flops=int(w["matmul_flops"]),
                other_flops=int(w["other_flops"]), bytes=int(w["bytes"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise fail(f"workloads[{i}]", "a workload definition (id, layer_type, kernel, "
                       f"dtype, inputs, params, flops, bytes): {exc!r}") from exc  # fmt: skip
        if spec.dtype not in ELEMENT_BYTES or any(t.dtype not in ELEMENT_BYTES for t in inputs):
            raise fail(f"workloads[{i}].dtype", f"one of {', '.join(ELEMENT_BYTES)}")
        if spec.kernel not in SLICE_KERNELS:
            raise fail(f"workloads[{i}].kernel", f"one of {', '.join(SLICE_KERNELS)}")
        specs.append(spec)
        production.append(w.get("production") if isinstance(w.get("production"), dict) else {})
    if sha256_json(rows)[:16] != doc.get("hash"):
        raise fail("hash", "the hash of its workloads (the file was edited after it was "
                   "derived)")  # fmt: skip
    identity = {k: doc.get(k) for k in ("hash", "time_basis", "sources", "source_devices",
                                        "coverage")}  # fmt: skip
    identity["dtypes"] = sorted({w.dtype for w in specs})
    return SliceSet(Path(path), tuple(specs), {"path": str(path), **identity},
                    tuple(production))


# The kernels a slice's workloads run (suite/kernels.py builds each).
SLICE_KERNELS = ("linear", "bmm", "sdpa", "layer_norm", "rms_norm", "softmax", "gelu", "add",
                 "sum", "embedding")  # fmt: skip


def plan_slice(path: Path, dtypes: Sequence[str] | None, only: str | None) -> list[WorkloadSpec]:
    """The slice's workloads a `run --slice` or `ab --slice` request selects: in `dtypes`, each
    re-made at its recorded shapes where the slice holds it in another dtype (None: the slice's
    own dtypes); UsageError when the filters leave none."""
    from reviewkit.common.errors import UsageError
    from reviewkit.suite.workloads import select

    sliced = load_slice(path)
    own = sorted({w.dtype for w in sliced.specs})
    specs = list(sliced.specs) if dtypes is None else [
        w for d in dtypes for i in range(len(sliced.specs))
        if (w := sliced.in_dtype(i, d)) is not None]  # fmt: skip
    chosen = select(specs, only)
    if not chosen:
        raise UsageError(f"--slice {path}: no workload of it matches --dtype "
                         f"{','.join(dtypes or own)} and --only {only or '(all)'}; it holds "
                         f"{', '.join(own)} workloads")  # fmt: skip
    return chosen


def identity_of(path: str | None, device_type: str = "cpu",
                dtypes: Sequence[str] | None = None) -> dict | None:  # fmt: skip
    """What a run records of the slice it measured (its hash, basis, sources, and the notes
    `provenance_notes` gives), None without one."""
    if not path:
        return None
    identity = load_slice(Path(path)).identity
    return {**identity, "notes": provenance_notes(identity, device_type, dtypes)}


def provenance_notes(identity: dict, device_type: str, dtypes: Sequence[str] | None) -> list[str]:
    """Where the slice's production differs from the run measuring it: another kind of device
    (a GPU trace's shapes measured on a CPU), another dtype (the shapes re-made in it)."""
    notes = []
    own = identity.get("dtypes") or None
    gpu = identity.get("time_basis") == "device"
    if gpu and device_type == "cpu":
        names = ", ".join(identity.get("source_devices") or []) or "a GPU"
        notes.append(f"the slice comes from a trace on {names} (device time); measured here on "
                     "the CPU, its shapes are production's and its times are this CPU's")
    elif not gpu and device_type != "cpu":
        notes.append(f"the slice comes from a CPU trace (host time); measured here on "
                     f"{device_type}, its shapes are production's and its times this device's")
    if dtypes is not None and own is not None and sorted(dtypes) != own:
        notes.append(f"production ran {', '.join(own)}; measured in {', '.join(dtypes)}: the "
                     "recorded shapes re-made in it")
    return notes
