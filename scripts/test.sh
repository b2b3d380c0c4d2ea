#!/usr/bin/env bash
# Set up (idempotently) and run every check: ruff, the import-layer contracts, mypy over every
# package, the policy examples, and the whole pytest suite.  In CI (CI=true) a `bpf` test that
# would skip fails.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/setup.sh
export PATH="$root/.venv/bin:$PATH"
[ "${CI:-}" = true ] && export GPUWARDEN_REQUIRE_BPF=1 GPUWARDEN_REQUIRE_K8S=1
# The k8s tests find their binaries through KUBEBUILDER_ASSETS (the envtest convention).
if [ -z "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$root/.cache/k8s/v1.36.2/kube-apiserver" ]; then
  export KUBEBUILDER_ASSETS="$root/.cache/k8s/v1.36.2"
fi
echo "== ruff"; ruff check .
echo "== import contracts"; lint-imports
echo "== mypy --strict (every package; strict is pyproject's setting)"
mypy policy agent libvgpu bpf gpuwarden deviceplugin extender draplugin
echo "== mypy (the Kubernetes test bed)"; mypy --strict tests/testbed
echo "== example policies"
gpuwarden policy check examples/policies
gpuwarden policy test examples/policies/tests
echo "== pytest"; python -m pytest "$@"
