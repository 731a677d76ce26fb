"""A team's torch.export program and saved inputs: checked before torch reads them, loaded, and
run under a mapping's knobs (torch)."""

from __future__ import annotations

import copy
import io
import json
import operator
import pickle
import re
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from reviewkit.common.errors import UsageError
from reviewkit.common.hashing import sha256_file
from reviewkit.measure.mapping import KnobMapping
from reviewkit.suite import kernels

# The entries torch.export.save writes for one exported program (below the archive's root
# folder); anything else (AOTInductor or ExecuTorch binaries, say) is refused unread.
ARCHIVE_ENTRIES = re.compile(
    r"(archive_format|archive_version|byteorder|\.data/[\w.-]+|models/\w+\.json|"
    r"data/(weights|constants)/[\w.-]+|data/sample_inputs/\w+\.pt|extra/[\w.-]+)"
)
PROGRAM_NAME = "model"  # the one program torch.export.load returns from an archive
# A shape expression may only be sympy arithmetic over size symbols: these names and symbols
# (s0, u1, ...); `Symbol('s0', positive=True)` declarations are read as their name.
SYMPY_NAMES = frozenset((
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
    "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
    "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt",
    "RoundDecimal", "ToFloat", "Identity", "Max", "Min", "Abs", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
    "And", "Or", "Not", "Piecewise", "Integer", "Rational", "Float", "Pow", "Mul", "Add", "oo",
    "zoo", "nan", "int_oo", "true", "false", "True", "False", "sqrt", "floor", "ceiling",
))  # fmt: skip
_SYMBOL = re.compile(r"Symbol\('([a-z]+\d+)'(?:,\s*[a-z_]+=(?:True|False))*\)")
_TOKEN = re.compile(
    r"\s*(?:\d+(?:\.\d+)?(?:e[-+]?\d+)?|([A-Za-z_]\w*)|\*\*|//|[=!<>]=|[-+*/%(),<>&|~])"
)
_SIZE_SYMBOL = re.compile(r"[a-z]+\d+|(OpaqueUnaryFn|BitwiseFn)_[a-z_]+")
# Python callables a graph may call beside torch operators: arithmetic on sizes.
OPERATORS = ("getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos",
             "abs", "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert",
             "lshift", "rshift")  # fmt: skip
SAFE_PYTHON_TARGETS = frozenset(
    [getattr(operator, n) for n in OPERATORS]
    + [getattr(torch, n) for n in dir(torch) if n.startswith(("sym_", "_sym_"))]
)
ASSERT_METADATA = torch.ops.aten._assert_tensor_metadata.default
DTYPES = {**kernels.TORCH_DTYPES, "fp64": torch.float64}


@dataclass(frozen=True)
class Program:
    """A loaded exported program and what its graph holds that decides which knobs apply."""

    path: Path
    sha256: str
    exported: Any  # torch.export.ExportedProgram
    exported_dtype: str  # the dtype most of its floating parameters are in
    fixed_dtype_ops: int  # ops whose floating dtype is written into the graph (to(), arange())
    attention_ops: int  # scaled_dot_product_attention calls
    linear_modules: int  # nn.Linear modules in ep.module() (torch.export keeps none)


def _refuse(path: Path, why: str) -> UsageError:
    return UsageError(f"--model {path}: {why}")


def _safe_expr(text: str) -> bool:
    text, pos = _SYMBOL.sub(lambda m: m.group(1), text), 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return text[pos:].strip() == ""
        name = m.group(1)
        if name and name not in SYMPY_NAMES and not _SIZE_SYMBOL.fullmatch(name):
            return False
        pos = m.end()
    return True


def _expressions(node: object):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr_str" and isinstance(value, str):
                yield value
            else:
                yield from _expressions(value)
    elif isinstance(node, list):
        for value in node:
            yield from _expressions(value)


def _weights_only(data: bytes) -> str:
    """'' when torch's weights-only unpickler reads the payload, else why not."""
    try:
        torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:  # any refusal is the answer
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
    return ""


def _check_payloads(path: Path, entry: str, config: dict) -> None:
    """Weights and constants must be raw tensor bytes: a pickled one (use_pickle) or a custom or
    opaque object is unpickled by torch.export.load with full pickle."""
    for fqn, meta in config.items():
        if meta.get("use_pickle") or not str(meta.get("path_name", "")).startswith(
            ("weight_", "tensor_")
        ):
            raise _refuse(path, f"{entry}: {fqn} is a pickled payload or a custom object, which "
                          "torch.export.load would unpickle with full pickle; export tensors "
                          "only")  # fmt: skip


def check_archive(path: Path) -> None:
    """Refuse, before torch reads it, a .pt2 holding what torch.export.load would execute."""
    if not zipfile.is_zipfile(path):
        raise _refuse(path, "not a torch.export program: a .pt2 is a zip archive written by "
                      "torch.export.save(exported_program, FILE)")  # fmt: skip
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        roots = {n.split("/", 1)[0] for n in names}
        if len(roots) != 1 or any("/" not in n for n in names):
            raise _refuse(path, "not a torch.export archive (one root folder expected); save "
                          "it with torch.export.save")  # fmt: skip
        root = roots.pop() + "/"
        entries = {n[len(root):]: n for n in names}
        if f"models/{PROGRAM_NAME}.json" not in entries:
            raise _refuse(path, f"holds no exported program (models/{PROGRAM_NAME}.json); save "
                          "one with torch.export.save")  # fmt: skip
        other = sorted(e for e in entries if not ARCHIVE_ENTRIES.fullmatch(e))
        if other:
            raise _refuse(path, f"holds entries beyond an exported program's "
                          f"({', '.join(other[:3])}); reviewkit loads plain torch.export "
                          "programs only, not compiled packages")  # fmt: skip
        try:
            for entry, name in entries.items():
                if entry.endswith("_config.json"):
                    _check_payloads(path, entry, json.loads(archive.read(name))["config"])
                elif entry.endswith(".pt"):
                    why = _weights_only(archive.read(name))
                    if why:
                        raise _refuse(path, f"{entry} is refused by the weights-only unpickler "
                                      f"({why}); torch.export.load would retry it with full "
                                      "pickle")  # fmt: skip
            # torch.export.load deserializes every program in models/, not only the one it
            # returns: each one's shape expressions are read
            graphs = [json.loads(archive.read(name)) for entry, name in entries.items()
                      if entry.startswith("models/")]  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile) as exc:
            raise _refuse(path, f"a damaged archive ({type(exc).__name__}: {str(exc)[:80]}); "
                          "save it again with torch.export.save") from None  # fmt: skip
        for expr in (e for graph in graphs for e in _expressions(graph)):
            if not _safe_expr(expr):
                raise _refuse(path, f"a shape expression is not sympy arithmetic over size "
                              f"symbols ({expr[:60]!r}); torch.export.load would eval it")


def _graphs(module: torch.nn.Module):
    return [m.graph for m in module.modules() if isinstance(m, torch.fx.GraphModule)]


def _unsafe_calls(module: torch.nn.Module) -> list[str]:
    bad = []
    for graph in _graphs(module):
        for node in graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            target = node.target
            if node.op == "call_function" and (
                isinstance(target, torch._ops.OpOverload | torch._ops.HigherOrderOperator)
                or target in SAFE_PYTHON_TARGETS
                or getattr(target, "__module__", None) == "math"
            ):
                continue
            bad.append(f"{node.name}: {node.op} {target!r}"[:80])
    return bad


def _floating_dtypes(obj: object) -> bool:
    leaves = pytree.tree_leaves(obj)
    return any(isinstance(x, torch.dtype) and x.is_floating_point for x in leaves)


def load_program(path: Path) -> Program:
    """The exported program at `path`, checked before and after torch.export.load."""
    if not path.is_file():
        raise _refuse(path, "no such file; pass a program saved with torch.export.save")
    check_archive(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = torch.export.load(str(path))
    except Exception as exc:  # torch raises many kinds for a bad archive
        raise _refuse(path, f"torch.export.load could not read it ({type(exc).__name__}: "
                      f"{str(exc)[:160]}); re-save it with this torch") from None  # fmt: skip
    bad = _unsafe_calls(exported.graph_module)
    if bad:
        raise _refuse(path, f"its graph calls more than torch operators ({'; '.join(bad[:2])})"
                      "; reviewkit runs aten and higher-order ops only")  # fmt: skip
    nodes = [n for g in _graphs(exported.graph_module) for n in g.nodes]
    fixed = sum(n.target is not ASSERT_METADATA and _floating_dtypes((n.args, n.kwargs))
                for n in nodes)  # fmt: skip
    attention = sum("scaled_dot_product" in str(n.target) for n in nodes)
    params = Counter(p.dtype for p in exported.state_dict.values() if p.is_floating_point())
    dtype = params.most_common(1)[0][0] if params else torch.float32
    names = {v: k for k, v in DTYPES.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        linear = sum(isinstance(m, torch.nn.Linear) for m in exported.module().modules())
    return Program(path, sha256_file(path), exported, names.get(dtype, str(dtype)), fixed,
                   attention, linear)  # fmt: skip


def load_inputs(path: Path, program: Program) -> tuple[tuple, dict]:
    """(args, kwargs) from a torch.save file: a tensor, a tuple or list (positional), or a dict
    (keyword arguments), read with the weights-only unpickler and matched to the program."""
    where = f"--inputs {path}"
    if not path.is_file():
        raise UsageError(f"{where}: no such file; save the inputs with torch.save((x,), FILE)")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise UsageError(f"{where}: not a torch.save file; save the inputs with "
                         "torch.save((x,), FILE)")  # fmt: skip
    try:
        loaded = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()
        raise UsageError(f"{where}: holds an object the weights-only unpickler refuses "
                         f"({first[-1][:160] if first else 'UnpicklingError'}); save tensors "
                         "only, as a tensor, a tuple or list, or a dict") from None  # fmt: skip
    except Exception as exc:  # not a torch.save file at all
        raise UsageError(f"{where}: not a torch.save file ({type(exc).__name__}); save the "
                         "inputs with torch.save((x,), FILE)") from None  # fmt: skip
    if isinstance(loaded, torch.Tensor):
        args, kwargs = (loaded,), {}
    elif isinstance(loaded, tuple | list):
        args, kwargs = tuple(loaded), {}
    elif isinstance(loaded, dict) and all(isinstance(k, str) for k in loaded):
        args, kwargs = (), dict(loaded)
    else:
        raise UsageError(f"{where}: holds a {type(loaded).__name__}; expected a tensor, a tuple "
                         "or list of positional inputs, or a dict of keyword inputs")
    spec = program.exported.call_spec.in_spec
    want_args, want_kwargs = spec.child(0).num_children, list(spec.child(1).context or [])
    if set(kwargs) == set(want_kwargs):
        kwargs = {k: kwargs[k] for k in want_kwargs}  # the program's keyword order
    if pytree.tree_flatten((args, kwargs))[1] != spec:
        held, takes = _described(len(args), list(kwargs)), _described(want_args, want_kwargs)
        how = " in another structure" if held == takes else ""
        raise UsageError(f"{where}: holds {held}{how}; the program takes {takes}; save them as "
                         "it was exported with: torch.save((x, ...), FILE), or a dict of its "
                         "keyword inputs")  # fmt: skip
    return args, kwargs


def _described(positional: int, keywords: list[str]) -> str:
    text = f"{positional} positional input(s)"
    return text + (f" and keyword input(s) {', '.join(keywords)}" if keywords else "")


def _retyped(obj: object, dtype: torch.dtype) -> object:
    return pytree.tree_map(
        lambda x: dtype if isinstance(x, torch.dtype) and x.is_floating_point else x, obj
    )


def _module(program: Program, dtype: torch.dtype | None, whole_graph: bool, device):
    """A private copy of the program's module (ep.module() shares the program's tensors), its
    dtype checks dropped so that it can run cast; `whole_graph` also turns every floating dtype
    the graph fixes into `dtype` (the float64 reference), else the graph keeps them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = copy.deepcopy(program.exported.module())
    for sub in [m for m in module.modules() if isinstance(m, torch.fx.GraphModule)]:
        for node in list(sub.graph.nodes):
            if node.target is ASSERT_METADATA and not node.users:
                sub.graph.erase_node(node)
            elif whole_graph and dtype is not None:
                node.args, node.kwargs = _retyped(node.args, dtype), _retyped(node.kwargs, dtype)
        sub.recompile()
    return module.to(device=device, dtype=dtype) if dtype is not None else module.to(device)


def run(program: Program, args: tuple, kwargs: dict, dtype: str | None, settings: dict,
        device: torch.device, whole_graph: bool = False) -> list[torch.Tensor]:  # fmt: skip
    """The program's floating outputs, in float64, after one call under the mapping: its
    parameters, buffers and floating inputs in `dtype` (None: as exported), with the knobs
    torch holds (threads, float32 matmul precision, oneDNN, attention backend) set."""
    to = DTYPES[dtype] if dtype is not None else None
    module = _module(program, to, whole_graph, device)

    def cast(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.to(device=device, dtype=to) if to and x.is_floating_point() else x.to(device)

    a, k = pytree.tree_map(cast, (args, kwargs))
    mapping = KnobMapping(settings=dict(settings), dtypes=(dtype or program.exported_dtype,))
    with mapping.active(), torch.inference_mode():
        out = module(*a, **k)
    leaves = [t for t in pytree.tree_leaves(out)
              if isinstance(t, torch.Tensor) and t.is_floating_point()]  # fmt: skip
    return [t.detach().to("cpu", torch.float64) for t in leaves]


# Knob values that leave a program as it is.
NO_CHANGE = {"quantization": "none", "sparsity": "dense", "memory_format": "contiguous",
             "attention_backend": "default", "compile_mode": "eager"}  # fmt: skip
# Knobs whose settings torch holds globally: KnobMapping.active() sets them around the call.
HELD_BY_TORCH = ("threads", "float32_matmul_precision", "mkldnn_enabled", "attention_backend")


def not_applicable(settings: dict, program: Program, device_type: str) -> dict[str, str]:
    """The knobs of a mapping that cannot change how this program runs, each with why not."""
    dtype = str(settings.get("dtype", program.exported_dtype))
    out = {}
    for name, value in settings.items():
        if name == "dtype" or NO_CHANGE.get(name) == value:
            continue
        if name == "float32_matmul_precision" and dtype != "fp32":
            out[name] = f"float32 matmul precision only changes fp32 matmuls; this runs in {dtype}"
        elif name == "mkldnn_enabled" and device_type != "cpu":
            out[name] = "oneDNN is the CPU's kernel library"
        elif name == "attention_backend" and not program.attention_ops:
            out[name] = "the program calls no scaled_dot_product_attention"
        elif name in ("quantization", "sparsity"):
            out[name] = (
                f"reviewkit applies {name} by rewriting nn.Linear modules, and a torch.export "
                f"program holds aten ops on its parameters ({program.linear_modules} nn.Linear "
                f"found); export the {value} model and pass it as --model"
            )
        elif name not in HELD_BY_TORCH:
            out[name] = f"reviewkit does not apply {name} to an exported program"
    return out


def looks_like_logits(outputs: list[torch.Tensor]) -> bool:
    """The rule for --logits left unsaid: the first floating output has a last dimension of 2
    or more over at least one leading dimension (classes or a vocabulary per position)."""
    return bool(outputs) and outputs[0].dim() >= 2 and outputs[0].shape[-1] >= 2
