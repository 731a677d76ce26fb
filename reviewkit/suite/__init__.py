"""The fixed, versioned suite: workload definitions (torch-free), kernels, ceilings, MFU."""
