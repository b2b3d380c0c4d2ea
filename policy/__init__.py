"""The policy language: grammar, parser, compiler to per-workload rules, diagnostics, and the
check / fmt / explain / test toolchain.

Pure: reads policy files and nothing else. Imports no GPU, kernel, gRPC or Kubernetes library.
"""
