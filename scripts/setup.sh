#!/usr/bin/env bash
# Set up gpuwarden on this machine, idempotently: system packages (BCC, kernel headers, a C
# toolchain, promtool), kernel headers linked for the running kernel, tracefs, a virtual
# environment in .venv that can import Debian's bcc, the project installed into it, and libvgpu
# (with the simulated driver) built, and the Kubernetes test bed's binaries unpacked from
# ../shared/k8s (when that folder exists) into .cache/k8s/v1.36.2 (KUBEBUILDER_ASSETS for the
# `k8s` tests).  Run as root for eBPF; without root everything else is done.
#
#   scripts/setup.sh            # everything
#   GPUWARDEN_SKIP_APT=1 ...    # do not touch system packages (they are reported if missing)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

say()  { printf 'setup: %s\n' "$*" >&2; }
warn() { printf 'setup: WARNING: %s\n' "$*" >&2; }
die()  { printf 'setup: ERROR: %s\n' "$*" >&2; exit 2; }

is_root=0; [ "$(id -u)" -eq 0 ] && is_root=1
ebpf_ok=1

# ---- system packages -------------------------------------------------------------------------
apt_pkgs=(build-essential make python3 python3-venv python3-dev bpfcc-tools python3-bpfcc
          prometheus util-linux procps libatomic1
          etcd-server runc containernetworking-plugins openssl busybox-static xz-utils
          python3-cryptography)  # the webhook's certificates (extender/certs.py)
missing_pkgs() {
  local p out=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out+=("$p")
  done
  [ ${#out[@]} -eq 0 ] || printf '%s\n' "${out[@]}"
}
headers_pkg() {
  # Prefer headers of the running kernel; Debian's generic headers serve uprobe programs when the
  # running kernel ships none (BCC only needs them to compile uprobe programs).
  if apt-cache show "linux-headers-$(uname -r)" >/dev/null 2>&1; then
    echo "linux-headers-$(uname -r)"
  elif apt-cache show linux-headers-amd64 >/dev/null 2>&1; then
    echo linux-headers-amd64
  elif apt-cache show linux-headers-generic >/dev/null 2>&1; then
    echo linux-headers-generic
  fi
}

if ! command -v dpkg-query >/dev/null; then
  warn "not a Debian/Ubuntu system: install BCC (python3 bindings), kernel headers, a C compiler and python3-venv by hand"
elif [ "${GPUWARDEN_SKIP_APT:-0}" = 1 ]; then
  mapfile -t miss < <(missing_pkgs "${apt_pkgs[@]}")
  [ ${#miss[@]} -eq 0 ] || warn "GPUWARDEN_SKIP_APT=1 and these packages are missing: ${miss[*]}"
else
  mapfile -t miss < <(missing_pkgs "${apt_pkgs[@]}")
  need_headers=0
  [ -e "/lib/modules/$(uname -r)/build/include" ] || need_headers=1
  if [ ${#miss[@]} -gt 0 ] || [ $need_headers = 1 ]; then
    if [ $is_root = 1 ]; then
      say "installing system packages: ${miss[*]:-} (kernel headers: $need_headers)"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq || die "apt-get update failed: check the network or the apt sources"
      hp=""; [ $need_headers = 1 ] && hp=$(headers_pkg)
      [ $need_headers = 1 ] && [ -z "$hp" ] && warn "no kernel headers package found for $(uname -r)"
      # shellcheck disable=SC2086
      apt-get install -y -qq --no-install-recommends "${miss[@]}" $hp >/dev/null \
        || die "apt-get install ${miss[*]} $hp failed"
    else
      warn "not root: cannot install ${miss[*]:-kernel headers}; eBPF will not work (run as root: sudo $0)"
      ebpf_ok=0
    fi
  fi
fi

# ---- kernel headers for the running kernel ---------------------------------------------------
moddir=/lib/modules/$(uname -r)
if [ ! -e "$moddir/build/include" ]; then
  hdr=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$hdr" ] || hdr=$(ls -d /usr/src/linux-headers-*-generic 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$hdr" ]; then
    warn "no kernel headers under /usr/src: BCC cannot compile probes (install linux-headers-amd64)"
    ebpf_ok=0
  elif [ $is_root = 1 ]; then
    common=${hdr%-amd64}-common; [ -d "$common" ] || common=$hdr
    mkdir -p "$moddir"
    ln -sfn "$hdr" "$moddir/build"
    ln -sfn "$common" "$moddir/source"
    say "linked $hdr as $moddir/build (the running kernel ships no headers)"
  else
    warn "not root: cannot link $hdr as $moddir/build"; ebpf_ok=0
  fi
fi

# ---- tracefs ---------------------------------------------------------------------------------
if [ ! -e /sys/kernel/tracing/uprobe_events ]; then
  if [ $is_root = 1 ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null \
      || { warn "could not mount tracefs on /sys/kernel/tracing"; ebpf_ok=0; }
  else
    warn "tracefs is not mounted on /sys/kernel/tracing and mounting needs root"; ebpf_ok=0
  fi
fi
[ -e /sys/kernel/tracing/uprobe_events ] || { [ $ebpf_ok = 0 ] || warn "kernel has no uprobe_events (CONFIG_UPROBE_EVENTS)"; ebpf_ok=0; }

# ---- virtual environment ---------------------------------------------------------------------
# Debian's bcc is built for Debian's own python3, so the venv is made from /usr/bin/python3 with
# the system site-packages visible.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || die "no python3 found (install python3 >= 3.11)"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$py is $("$py" -V 2>&1); gpuwarden needs Python 3.11 or newer"
if [ ! -x .venv/bin/python ]; then
  say "creating .venv from $py"
  "$py" -m venv --system-site-packages .venv \
    || die "could not create .venv with $py (install python3-venv)"
fi
stamp=.venv/.gpuwarden-installed
want=$(cat pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing gpuwarden and its dependencies into .venv (about a minute; pip's progress follows)"
  # pip's "Collecting"/"Installing" lines show progress; its notes about absent local find-links
  # folders are noise on some machines.
  .venv/bin/python -m pip install --progress-bar off --disable-pip-version-check -e ".[dev]" 2>&1 \
    | { grep --line-buffered -E "^(Collecting|Installing|Successfully|ERROR|error)" || true; } \
    | sed -u 's/^/setup: pip: /' >&2 \
    || die "pip install into .venv failed (is PyPI reachable?)"
  echo "$want" > "$stamp"
fi
# ---- the gpuwarden command on PATH ----------------------------------------------------------
# As root: a link in /usr/local/bin (replaced only when it is a link to some checkout's .venv).
link=/usr/local/bin/gpuwarden
if [ $is_root = 1 ] && { [ ! -e "$link" ] && [ ! -L "$link" ] || [[ "$(readlink "$link")" == */.venv/bin/gpuwarden ]]; }; then
  if [ "$(readlink "$link" 2>/dev/null)" != "$root/.venv/bin/gpuwarden" ]; then
    mkdir -p /usr/local/bin && ln -sfn "$root/.venv/bin/gpuwarden" "$link"
    say "linked $link -> $root/.venv/bin/gpuwarden"
  fi
elif [ "$(command -v gpuwarden 2>/dev/null)" != "$root/.venv/bin/gpuwarden" ]; then
  say "to type \`gpuwarden\` in this shell: export PATH=\"$root/.venv/bin:\$PATH\""
fi
if ! .venv/bin/python -c 'import bcc' 2>/dev/null; then
  warn ".venv cannot import bcc (install python3-bpfcc); eBPF features are unavailable"; ebpf_ok=0
fi

# ---- libvgpu and the simulated driver --------------------------------------------------------
command -v cc >/dev/null || die "no C compiler (install build-essential)"
make -s -C libvgpu >/dev/null || die "building libvgpu failed (see the compiler output above)"

# ---- the Kubernetes test bed (tests marked `k8s`) ---------------------------------------------
# Kubernetes v1.36.2 and containerd 2 binaries ship as .xz archives with a SHA256SUMS, in
# $GPUWARDEN_K8S_ARCHIVES (default: shared/k8s beside the clone, where CI lays them); they
# are checked against its SHA256SUMS and unpacked once (a stamp holds the sums' own hash).
command -v kubectl >/dev/null \
  || warn "kubectl is not on PATH: the k8s tests do not need it, but debugging a test cluster does"
k8s_src="${GPUWARDEN_K8S_ARCHIVES:-$root/../shared/k8s}"
k8s_dst="$root/.cache/k8s/v1.36.2"
if [ -f "$k8s_src/SHA256SUMS" ]; then
  k8s_want=$(sha256sum < "$k8s_src/SHA256SUMS" | cut -c1-64)
  k8s_ok=1
  [ "$(cat "$k8s_dst/.unpacked" 2>/dev/null)" = "$k8s_want" ] || k8s_ok=0
  while read -r _ xz; do
    [ -x "$k8s_dst/${xz%.xz}" ] || k8s_ok=0
  done < "$k8s_src/SHA256SUMS"
  if [ $k8s_ok = 0 ]; then
    say "unpacking Kubernetes binaries from $k8s_src into $k8s_dst"
    (cd "$k8s_src" && sha256sum --quiet -c SHA256SUMS) \
      || die "$k8s_src: a file does not match SHA256SUMS (a corrupt copy?)"
    mkdir -p "$k8s_dst"
    rm -f "$k8s_dst/.unpacked"
    while read -r _ xz; do
      xz -dc "$k8s_src/$xz" > "$k8s_dst/${xz%.xz}.part" || die "unpacking $k8s_src/$xz failed"
      chmod +x "$k8s_dst/${xz%.xz}.part"
      mv -f "$k8s_dst/${xz%.xz}.part" "$k8s_dst/${xz%.xz}"
    done < "$k8s_src/SHA256SUMS"
    echo "$k8s_want" > "$k8s_dst/.unpacked"
  fi
elif [ ! -d "$k8s_dst" ]; then
  warn "no $k8s_src and no $k8s_dst: tests marked k8s will skip (set KUBEBUILDER_ASSETS to a folder of Kubernetes binaries)"
fi

if [ $ebpf_ok = 1 ] && [ $is_root = 1 ]; then
  say "ready (eBPF available)"
else
  say "ready without eBPF: the audit probes will not run on this machine"
fi
