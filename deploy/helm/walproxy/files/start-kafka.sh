#!/bin/sh
# Starts one Kafka node of the walproxy chart: writes this pod's server.properties from the
# chart's ConfigMap, formats the data directory on first start, then runs kafka-server-start.sh.
#
#   start-kafka.sh broker|controller
#
# Environment: POD_NAME (<statefulset>-<ordinal>), CLUSTER_ID, KAFKA_HOME (default /opt/kafka),
# WALPROXY_CONFIG_DIR (the ConfigMap, default /etc/walproxy), WALPROXY_POD_DIR (an emptyDir; for
# brokers it holds identity.env from the pod-identity init container; default /var/run/walproxy).
set -eu
role="${1:?usage: start-kafka.sh broker|controller}"
config_dir="${WALPROXY_CONFIG_DIR:-/etc/walproxy}"
pod_dir="${WALPROXY_POD_DIR:-/var/run/walproxy}"
kafka_home="${KAFKA_HOME:-/opt/kafka}"
ordinal="${POD_NAME##*-}"
case "$ordinal" in
  '' | *[!0-9]*) echo "start-kafka.sh: POD_NAME '$POD_NAME' does not end in -<ordinal>" >&2; exit 1 ;;
esac

props="$pod_dir/server.properties"
# Shared settings first, then this node's own (node.id, listeners): for a key set twice the later
# line wins, so the chart's wiring always does.
cat "$config_dir/$role.properties" "$config_dir/$role-$ordinal.properties" > "$props.tmp"
if [ "$role" = broker ]; then
  # BROKER_RACK: the zone label of this pod's node (empty when brokers.rack is off).
  . "$pod_dir/identity.env"
  if [ -n "${BROKER_RACK:-}" ]; then printf 'broker.rack=%s\n' "$BROKER_RACK" >> "$props.tmp"; fi
fi
mv "$props.tmp" "$props"
echo "start-kafka.sh: $role $ordinal with $props:" >&2
cat "$props" >&2

"$kafka_home/bin/kafka-storage.sh" format --ignore-formatted --cluster-id "$CLUSTER_ID" --config "$props"
exec "$kafka_home/bin/kafka-server-start.sh" "$props"
