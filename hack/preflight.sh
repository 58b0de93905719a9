#!/usr/bin/env bash
# Preflight of `make test`: before any tier runs, check that this machine can run every suite
# (root and the real node's packages for the suites with a real node, Prometheus for the load
# watcher's prometheus-source suite). When something is missing, stop with ONE message naming the
# `apt-get install -y …` line, instead of failing deep inside a test 30 minutes later.
#
# BERTH_SKIP_REAL_NODE=1 (set explicitly) instead lets the run go on without them: the suites that
# need them skip themselves under that variable only (framework.NeedRealNode), and this script
# names each suite left out, loudly.
#
# Only bash builtins and the checked tools are used, so a test can run it with a PATH of stubs.
# BERTH_CNI_DIR overrides where the CNI plugins are looked for (default /usr/lib/cni, Debian's).
set -u

cni_dir=${BERTH_CNI_DIR:-/usr/lib/cni}
src=${BASH_SOURCE[0]}
[[ $src == */* ]] || src=./$src
repo=$(cd "${src%/*}/.." && pwd)

missing=() # what is missing, as the user should read it
pkgs=()    # the Debian packages that provide it, deduplicated

need_pkg() {
  local p
  for p in "${pkgs[@]}"; do [[ $p == "$1" ]] && return; done
  pkgs+=("$1")
}

# tool:package, in the order the real node needs them. Debian puts some in sbin, which a
# non-login root shell may lack: those dirs are searched too (BERTH_PREFLIGHT_SBIN, which the
# preflight's own test empties to see only its PATH).
sbin_dirs=${BERTH_PREFLIGHT_SBIN-/usr/sbin /sbin}
have() {
  command -v "$1" >/dev/null 2>&1 && return 0
  local d
  for d in $sbin_dirs; do [[ -x $d/$1 ]] && return 0; done
  return 1
}
prometheus_missing=""
for entry in containerd:containerd containerd-shim-runc-v2:containerd ctr:containerd runc:runc \
  iptables:iptables iptables-save:iptables ip:iproute2 nsenter:util-linux prometheus:prometheus; do
  tool=${entry%%:*}
  pkg=${entry#*:}
  if ! have "$tool"; then
    missing+=("$tool")
    need_pkg "$pkg"
    [[ $tool == prometheus ]] && prometheus_missing=1
  fi
done
for plugin in bridge host-local loopback portmap; do
  if ! [[ -x $cni_dir/$plugin ]]; then
    missing+=("$cni_dir/$plugin")
    need_pkg containernetworking-plugins
  fi
done

uid=$(id -u 2>/dev/null || echo unknown)
not_root=""
if [[ $uid != 0 ]]; then
  not_root="not root (uid $uid): the real node creates a network namespace, mounts and cgroups"
fi

if [[ ${#missing[@]} -eq 0 && -z $not_root && ${BERTH_SKIP_REAL_NODE:-} != 1 ]]; then
  echo "preflight: root, real-node packages and prometheus present: every tier will run"
  exit 0
fi

# The suites that need what is missing call framework.NeedRealNode or framework.NeedHostTool;
# a package below framework (e2e/cluster) reads the variable itself (found in the source, so
# this list cannot drift from the tests).
left_out=()
for f in "$repo"/e2e/suites/*/*_test.go "$repo"/e2e/*/*_test.go; do
  [[ -f $f ]] || continue
  src=$(<"$f")
  name=${f#"$repo"/}
  if [[ $src == *framework.NeedRealNode\(* ]]; then
    left_out+=("$name (its tests that need a real node)")
  elif [[ $src == *'os.Getenv("BERTH_SKIP_REAL_NODE")'* ]]; then
    left_out+=("$name (its tests that need root)")
  fi
  if [[ -n $prometheus_missing && $src == *framework.NeedHostTool\(t,\ \"prometheus\"* ]]; then
    left_out+=("$name (prometheus)")
  fi
done

problem="nothing is missing, but the variable is set"
if [[ ${#missing[@]} -gt 0 ]]; then
  problem="missing ${missing[*]}"
fi
if [[ -n $not_root ]]; then
  [[ ${#missing[@]} -gt 0 ]] && problem="$problem; $not_root" || problem=$not_root
fi
fix=""
if [[ ${#pkgs[@]} -gt 0 ]]; then
  fix="apt-get install -y ${pkgs[*]}"
fi

if [[ ${BERTH_SKIP_REAL_NODE:-} == 1 ]]; then
  {
    echo
    echo "################################################################################"
    echo "# BERTH_SKIP_REAL_NODE=1: NOT running every test ($problem)."
    echo "# Left out (they skip themselves under this variable only):"
    for s in "${left_out[@]}"; do echo "#   $s"; done
    echo "# For the full run: ${fix:+$fix, then }make test${not_root:+ as root} without BERTH_SKIP_REAL_NODE."
    echo "################################################################################"
    echo
  } >&2
  exit 0
fi

{
  echo "preflight: this machine cannot run every test tier: $problem."
  if [[ -n $fix ]]; then
    echo "  Install:  $fix${not_root:+   (and run make test as root)}"
  else
    echo "  Run make test as root."
  fi
  echo "  Or run only what can run here: BERTH_SKIP_REAL_NODE=1 make test (the suites left out are named)."
} >&2
exit 1
