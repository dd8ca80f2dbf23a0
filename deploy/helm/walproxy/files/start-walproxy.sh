#!/bin/sh
# Starts the walproxy sidecar of one broker pod with the flags the chart rendered ("$@") plus the
# two that only the pod knows: --broker-id (the pod's ordinal, which is the broker's node.id) and
# --wal-store-url (the store of the pod's zone, chosen by the pod-identity init container).
#
# Environment: POD_NAME (<statefulset>-<ordinal>), WALPROXY_POD_DIR (default /var/run/walproxy),
# WALPROXY_MAIN (default /app/proxy/dist/cli/walproxy.mjs, the image's entry point),
# NODE_HEAP_FLAGS (node's flags before the entry point, e.g. --initial-old-space-size=112).
set -eu
pod_dir="${WALPROXY_POD_DIR:-/var/run/walproxy}"
ordinal="${POD_NAME##*-}"
case "$ordinal" in
  '' | *[!0-9]*) echo "start-walproxy.sh: POD_NAME '$POD_NAME' does not end in -<ordinal>" >&2; exit 1 ;;
esac
# WAL_STORE_URL (empty: no WAL).
. "$pod_dir/identity.env"
set -- sidecar "--broker-id=$ordinal" "$@"
if [ -n "${WAL_STORE_URL:-}" ]; then set -- "$@" "--wal-store-url=$WAL_STORE_URL"; fi
# NODE_HEAP_FLAGS: node's own flags that NODE_OPTIONS does not take (the chart's V8 heap start),
# split on spaces on purpose.
# shellcheck disable=SC2086
exec node ${NODE_HEAP_FLAGS:-} "${WALPROXY_MAIN:-/app/proxy/dist/cli/walproxy.mjs}" "$@"
