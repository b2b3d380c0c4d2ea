#!/usr/bin/env bash
# Set up (idempotently) and run every check: ruff, the import-layer contracts, the policy
# examples, and the whole pytest suite.  In CI (CI=true) a `bpf` test that would skip fails.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/setup.sh
export PATH="$root/.venv/bin:$PATH"
[ "${CI:-}" = true ] && export GPUWARDEN_REQUIRE_BPF=1
echo "== ruff"; ruff check .
echo "== import contracts"; lint-imports
echo "== example policies"
gpuwarden policy check examples/policies
gpuwarden policy test examples/policies/tests
echo "== pytest"; python -m pytest "$@"
