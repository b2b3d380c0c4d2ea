#!/usr/bin/env bash
# Set up (idempotently) and run the standalone demo: the agent enforcing examples/policies/ on
# this machine's GPU, or on the built-in simulated GPU where there is none.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
exec "$root/.venv/bin/gpuwarden" demo "$@"
