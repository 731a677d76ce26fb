"""What quality's loaders can and cannot execute, in the words --help, the docs and the evidence
file use (no torch: the CLI reads them to build its help)."""

# Why a .pt2 is treated as code: torch 2.13's own docstring for torch.export.load says it "uses
# pickle under the hood ... Never load data from an untrusted source"; its loader unpickles
# payloads marked use_pickle with weights_only=False, falls back to full pickle when the safe
# unpickler refuses the sample inputs or constants, loads AOTInductor shared libraries packed
# in the archive, and hands shape expressions to sympy.sympify (an eval). measure/program.py
# refuses each of those before torch reads the file.
INPUTS_LOADER = (
    "torch.load(weights_only=True): tensors, numbers, strings and plain containers only; "
    "any other pickled object is refused, and no code in the file runs"
)
PROGRAM_LOADER = (
    "torch.export.load, which can run code from the file (it unpickles some payloads with "
    "full pickle, loads AOTInductor libraries, evaluates shape expressions); reviewkit first "
    "refuses an archive holding any of those, and after loading a graph that calls anything "
    "but torch operators. That narrows the risk, it does not remove it: a .pt2 is a program, "
    "load only one your team exported"
)
