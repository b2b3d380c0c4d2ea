#!/usr/bin/env bash
# Run on a GPU host with no registry access (the lead's H200 runs): build libvgpu with the host's
# compiler, run the `gpu`-marked tests and the GPU benchmarks, and write logs under $OUT.
#   scripts/gpu-host-check.sh [tests|bench-shim|bench-bpf|bench-compute|bench-shapes|bench-shapes-long|bench-sharing|bench-trace|bench-gatewait|bench-newcomer|bench-light]...
#   (default: tests)
# Needs .gpu-bundle (see docs/development.md): BCC and the wheels this host lacks.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/gpuwarden-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source .gpu-bundle/bcc/bcc-env.sh; source .gpu-bundle/wheels/wheel-env.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv; uname -r;
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; } 2>&1 | tee "$OUT/host.txt"
make -s -C libvgpu 2>&1 | tee "$OUT/build.log" || exit 1
[ $# -gt 0 ] || set -- tests
for step in "$@"; do
  echo "===== $step"
  case $step in
    # only the files holding gpu tests: the rest import what a GPU host may lack (kubernetes,
    # grpcio-tools), and one failed collection would stop the run
    tests) mapfile -t gpu_files < <(grep -rl --include='*.py' 'mark\.gpu' tests | sort)
           timeout 420 python3 -m pytest -m gpu "${gpu_files[@]}" -v -rP -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" ;;
    bench-shim) timeout 200 python3 tests/benchmarks/bench_shim.py --rounds 5 2>&1 | tee "$OUT/bench-shim.md" ;;
    bench-bpf) timeout 200 python3 tests/benchmarks/bench_bpf.py --launches 200000 --pairs 100000 --repeat 5 2>&1 | tee "$OUT/bench-bpf.md" ;;
    bench-compute) timeout 300 python3 tests/benchmarks/bench_compute.py --out "$OUT/compute" 2>&1 | tee "$OUT/bench-compute.log" ;;
    # issue 18's workload shapes and cold starts, in two steps that fit a 10-minute device call
    # each (the whole sweep ran past 590 s): the kernels under 1 ms (0-9, most of them
    # launch-bound, with their interleaved comparisons), then 4096² up, the encoders and the
    # cold starts.  A step cut short still writes the rows it finished.
    bench-shapes) timeout 590 python3 tests/benchmarks/bench_compute_shapes.py --only shapes --shapes 0,1,2,3,4,5,6,7,8,9 --phase 1.5 --warm 0.5 --out "$OUT/shapes" 2>&1 | tee "$OUT/bench-shapes.log" ;;
    bench-shapes-long) timeout 590 python3 tests/benchmarks/bench_compute_shapes.py --only shapes,cold --shapes 10,11,12,13,14,15,16 --phase 1.5 --warm 0.5 --out "$OUT/shapes-long" 2>&1 | tee "$OUT/bench-shapes-long.log" ;;
    # issue 18's default sharing and priority (about 3 minutes)
    bench-sharing) timeout 300 python3 tests/benchmarks/bench_compute_shapes.py --only shared,priority --phase 1.5 --warm 0.5 --out "$OUT/sharing" 2>&1 | tee "$OUT/bench-sharing.log" ;;
    # the busy feedback's first seconds: the encoders at 30 and 70 %, in 0.5-s slices (about 70 s)
    bench-trace) timeout 200 python3 tests/benchmarks/bench_compute_shapes.py --only trace --shapes 15,16 --limits 30,70 --out "$OUT/trace" 2>&1 | tee "$OUT/bench-trace.log" ;;
    # how the gate waits (sleep / auto / yield, alternated) with a spinning process per core
    bench-gatewait) timeout 300 python3 tests/benchmarks/bench_compute_shapes.py --only gatewait --cpu-load "$(nproc)" --gate-wait-rounds 2 --out "$OUT/gatewait" 2>&1 | tee "$OUT/bench-gatewait.log" ;;
    # a paced newcomer beside a container that ran alone without synchronising, two rounds
    # (about 160 s: one second's share depends on where the turns' windows fall)
    bench-newcomer) timeout 300 python3 tests/benchmarks/bench_compute_shapes.py --only newcomer --newcomer-rounds 2 --out "$OUT/newcomer" 2>&1 | tee "$OUT/bench-newcomer.log" ;;
    # request services at 30 beside a busy loop at 70, each against itself alone (about 150 s)
    bench-light) timeout 240 python3 tests/benchmarks/bench_compute_shapes.py --only light --phase 1.5 --warm 0.5 --out "$OUT/light" 2>&1 | tee "$OUT/bench-light.log" ;;
    *) echo "unknown step $step (tests|bench-shim|bench-bpf|bench-compute|bench-shapes|bench-shapes-long|bench-sharing|bench-trace|bench-gatewait|bench-newcomer|bench-light)"; exit 2 ;;
  esac
done
