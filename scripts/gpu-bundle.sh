#!/usr/bin/env bash
# Build .gpu-bundle/ for a GPU host that reaches no package registry (run here, as root, on
# Debian 12): Debian's BCC with its LLVM runtime and Python bindings, Debian's kernel headers (for
# hosts whose running kernel ships none), and the wheels the `gpu` tests import that such a host
# lacks.  scripts/gpu-host-check.sh sources what it writes.  Idempotent; about 55 MB.
#
#   scripts/gpu-bundle.sh [DEST]          # default .gpu-bundle (ignored through .git/info/exclude)
#   GPU_PYTHON=3.12 scripts/gpu-bundle.sh # the GPU host's Python version for the wheels
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-$root/.gpu-bundle}
pyver=${GPU_PYTHON:-3.12}
say() { printf 'gpu-bundle: %s\n' "$*" >&2; }
[ "$(id -u)" -eq 0 ] || { say "run as root (apt-get download / install)"; exit 2; }
if [ "$dest" = "$root/.gpu-bundle" ] && exclude=$(git -C "$root" rev-parse --git-path info/exclude 2>/dev/null); then
  case $exclude in /*) ;; *) exclude=$root/$exclude ;; esac
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.gpu-bundle/' "$exclude" 2>/dev/null || echo /.gpu-bundle/ >> "$exclude"
fi

# ---- BCC -------------------------------------------------------------------------------------
bcc=$dest/bcc; mkdir -p "$bcc"
if ! ls /usr/src/linux-headers-*-amd64 >/dev/null 2>&1; then
  say "installing linux-headers-amd64 (to carry Debian's kernel headers)"
  apt-get update -qq && apt-get install -y -qq linux-headers-amd64 >/dev/null
fi
say "downloading Debian's BCC, libbpf and LLVM 14 runtime"
(cd "$bcc" && apt-get download -qq libbpfcc libbpf1 python3-bpfcc libclang-cpp14 libllvm14 libz3-4)
hdr=$(ls -d /usr/src/linux-headers-*-amd64 | sort -V | tail -1); common=${hdr%-amd64}-common
tar -C /usr/src -cJf "$bcc/kheaders.tar.xz" --exclude='*/scripts/*' "$(basename "$hdr")" \
  "$(basename "$common")/include" "$(basename "$common")/arch/x86"
cat > "$bcc/bcc-env.sh" <<'ENV'
# Source on the GPU host, as root: unpacks BCC into /tmp/bcc, links kernel headers for the running
# kernel when it has none, mounts tracefs, and puts BCC's libraries and bindings on the paths.
_b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /tmp/bcc && for f in "$_b"/*.deb; do dpkg -x "$f" /tmp/bcc; done
mkdir -p /tmp/kh && tar -C /tmp/kh -xJf "$_b/kheaders.tar.xz"
_kh=$(ls -d /tmp/kh/linux-headers-*-amd64 | head -1)
mkdir -p "/lib/modules/$(uname -r)"
[ -e "/lib/modules/$(uname -r)/build/include" ] || ln -sfn "$_kh" "/lib/modules/$(uname -r)/build"
[ -e "/lib/modules/$(uname -r)/source/include" ] || ln -sfn "${_kh%-amd64}-common" "/lib/modules/$(uname -r)/source"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
export LD_LIBRARY_PATH=/tmp/bcc/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=/tmp/bcc/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}
unset _b _kh
ENV

# ---- wheels ----------------------------------------------------------------------------------
# What the `gpu` tests and their conftests import beyond what the GPU host has (it has CUDA,
# PyTorch, nvidia-ml-py and grpcio); the Kubernetes client is not needed there.
wheels=$dest/wheels; mkdir -p "$wheels"
say "downloading wheels for Python $pyver"
"$root/.venv/bin/python" -m pip download -q --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d "$wheels" \
  lark prometheus-client pyroute2 pyyaml rich hypothesis pytest
cat > "$wheels/wheel-env.sh" <<'ENV'
# Source on the GPU host: installs the carried wheels into /tmp/site (no registry) and puts it
# first on PYTHONPATH.
_w=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$_w"/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
unset _w
ENV
du -sh "$dest"/* >&2
