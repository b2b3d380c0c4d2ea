#!/usr/bin/env bash
# gpuwarden standalone demo: start the agent with examples/policies/, then run three workloads:
#   1. "within"  stays inside its 1 GiB slice and finishes normally;
#   2. "over"    asks for more than its slice through libvgpu and gets a normal out-of-memory;
#   3. "bypass"  drops LD_PRELOAD (libvgpu) and touches the GPU directly: the audit (eBPF, NVML)
#                catches it and the agent terminates then kills it, as the policy says.
# Runs on the real GPU when one is present, else on the simulated GPU (libvgpu/sim).
#
#   examples/demo/run_demo.sh [--policy DIR] [--keep] [--torch]
#     --keep   leave the agent running at the end (stop it with: kill <pid shown>)
#     --torch  (real GPU) use PyTorch workloads (examples/demo/torch_job.py) instead of gpu_job
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
policy="$root/examples/policies"
keep=0
torch=0
while [ $# -gt 0 ]; do
  case "$1" in
    --policy) policy="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --torch) torch=1; shift ;;
    *) echo "run_demo.sh: unknown argument $1 (valid: --policy DIR, --keep, --torch)" >&2; exit 2 ;;
  esac
done
py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
gw() { "$py" -m gpuwarden "$@"; }

work=$(mktemp -d /tmp/gpuwarden-demo.XXXXXX)
state="$work/state"
[ -f "$root/libvgpu/build/libvgpu.so" ] || make -s -C "$root/libvgpu"
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -I"$root/libvgpu/include" \
   "$root/examples/demo/gpu_job.c" -ldl -o "$work/gpu_job"

if [ -e /dev/nvidiactl ] && [ -z "${GPUWARDEN_DEMO_SIM:-}" ]; then
  where="the real GPU"
else
  where="the simulated GPU (no NVIDIA GPU here)"
  eval "$(gw sim env --state "$work/sim.state")"
  torch=0
fi
echo "== gpuwarden demo on $where; work dir $work"

# --audit-unmanaged: the demo never signals GPU processes it did not start
"$py" -m gpuwarden agent --policy "$policy" --state-dir "$state" --metrics-port 0 --quiet \
  --audit-unmanaged \
  > /dev/null 2> "$work/agent.err" &
agent=$!
cleanup() {
  if [ "$keep" = 0 ]; then kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; fi
}
trap cleanup EXIT
for _ in $(seq 1 600); do
  grep -q "ready;" "$work/agent.err" 2>/dev/null && break
  if ! kill -0 "$agent" 2>/dev/null; then cat "$work/agent.err" >&2; exit 1; fi
  sleep 0.1
done
cat "$work/agent.err"
port=$(sed -n 's|.*metrics on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$work/agent.err" | tail -1)

if [ "$torch" = 1 ]; then
  job=("$py" "$root/examples/demo/torch_job.py")
else
  job=("$work/gpu_job")
fi
run() { gw run --state-dir "$state" --namespace serving --label team=demo "$@"; }

echo
echo "== 1. within its slice: 1 GiB, uses 256 MiB"
set +e
run --name within --gpumem 1GiB -- "${job[@]}" 256 5000 &
within=$!
sleep 0.5
echo
echo "== 2. over its slice through libvgpu: 1 GiB, asks for 2 GiB in 256 MiB steps"
run --name over --gpumem 1GiB -- "${job[@]}" 2048 500 256
echo "   exit status $? (3 = the program saw out-of-memory, as on a full GPU)"
echo
echo "== live table while workload 1 runs: gpuwarden top --state-dir $state"
sleep 1
gw top --once --state-dir "$state"
echo
echo "== 3. bypassing libvgpu: drops LD_PRELOAD, then uses 256 MiB directly"
run --name bypass --gpumem 1GiB -- "${job[@]}" --bypass 256 60000
rc=$?
sig=""
[ "$rc" -ge 128 ] && sig=" = SIG$(kill -l $((rc - 128)))"
echo "   exit status $rc$sig (the rule says: kill after 5s, so SIGTERM now, SIGKILL after 5 s)"
wait "$within"
echo "   (workload 1 exit status $?)"
set -e

echo
echo "== verdicts (audit events, $state/audit.jsonl)"
"$py" - "$state/audit.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") in ("violation", "action"):
        w = e.get("workload", {})
        ev = e.get("evidence", {})
        mib = lambda b: "-" if b is None else f"{b / 2**20:.0f}MiB"
        print(f"  {w.get('namespace')}/{w.get('pod'):<8} {e['action']:<16} verdict={e.get('verdict')}"
              f" rule={e.get('rule')} shim={mib(ev.get('shim'))} ebpf={mib(ev.get('ebpf'))}"
              f" nvml={mib(ev.get('nvml'))} {e.get('detail', '')}")
PY
echo
echo "== metrics (from the agent's /metrics)"
"$py" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
  "http://127.0.0.1:$port/metrics" | grep -E '^gpuwarden_(violations|actions)_total|^gpuwarden_(ebpf|nvml)_up|^gpuwarden_policy_info|^gpuwarden_gpu_(memory_used|memory_allocated|slices)' || true
echo
if [ "$keep" = 1 ]; then
  echo "== the agent keeps running (pid $agent); the demo's workloads have ended:"
  echo "   metrics      http://127.0.0.1:$port/metrics   health http://127.0.0.1:$port/healthz"
  echo "   live table   gpuwarden top --state-dir $state"
  echo "   audit log    $state/audit.jsonl"
  echo "   stop it      kill $agent"
else
  echo "== the agent stops with the demo. To look at /metrics and \`gpuwarden top\` yourself,"
  echo "   keep it running: gpuwarden demo --keep  (or scripts/demo.sh --keep)"
fi
