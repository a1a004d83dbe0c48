"""Benchmarks on the local control plane: every figure is measured beside a baseline of the same run."""
