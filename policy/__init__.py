"""The policy language: grammar, parser, compiler to per-workload rules, diagnostics, and the
check / fmt / explain / test toolchain.

Pure: reads policy files and nothing else. Imports no GPU, kernel, gRPC or Kubernetes library
(an import-linter contract keeps it so); YAML is read only by `policy.cli`.
"""

from policy.compiled import CompiledRule
from policy.compiler import CompiledPolicy
from policy.diagnostics import Diagnostic, Severity, Span
from policy.loader import LoadResult, load_policy, load_texts
from policy.model import EffectiveRule, ResourceRequest, ViolationResponse, Workload

__all__ = [
    "CompiledPolicy",
    "CompiledRule",
    "Diagnostic",
    "EffectiveRule",
    "LoadResult",
    "ResourceRequest",
    "Severity",
    "Span",
    "ViolationResponse",
    "Workload",
    "load_policy",
    "load_texts",
]
