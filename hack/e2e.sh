#!/usr/bin/env bash
# The end-to-end tier of `make test`: the suites that run a real node go one package at a time
# (they take the host-wide real-node lock anyway, and userpath's before/after checks of host
# paths — /var/log/containers, /var/lib/cni/results, containerd's shim sockets — would see
# another suite's node), while every other e2e package runs beside them, also one at a time, so
# two test binaries share the machine's two cores as before.
# GO and GO_TEST_FLAGS come from the Makefile's environment.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
read -r -a flags <<<"${GO_TEST_FLAGS:-}"

# Which suites need a real node is read from the source (framework.NeedRealNode), as
# hack/preflight.sh does, so this list cannot drift from the suites.
mapfile -t real_dirs < <(grep -l 'framework.NeedRealNode(' e2e/suites/*/*_test.go | xargs -n1 dirname | sort -u | sed 's#^#./#')
mapfile -t real < <(cd e2e && "$GO" list "${real_dirs[@]/.\/e2e\//./}")
mapfile -t all < <(cd e2e && "$GO" list ./...)
other=()
for p in "${all[@]}"; do
  skip=
  for r in "${real[@]}"; do [[ $p == "$r" ]] && skip=1; done
  [[ -n $skip ]] || other+=("$p")
done

echo "e2e: real-node suites one at a time: ${real[*]##*/}"
rc=0
( cd e2e && "$GO" test -race -count=1 -p 1 -timeout 40m "${flags[@]}" "${real[@]}" 2>&1 | sed -u 's/^/[real node] /' ) &
real_pid=$!
( cd e2e && "$GO" test -race -count=1 -p 1 -timeout 40m "${flags[@]}" "${other[@]}" ) || rc=1
wait "$real_pid" || rc=1
exit "$rc"
