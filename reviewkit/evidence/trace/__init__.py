"""Production traces: the trace reader, its summary, the layer map, the workload fit."""
