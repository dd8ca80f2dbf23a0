#!/usr/bin/env bash
# Resolves a stock Apache Kafka (broker, controller, storage tool, perf tools) from Maven Central
# into .cache/kafka/<version>/, one flat directory per version (a JVM classpath `dir/*` must hold
# exactly one version of each library). Idempotent: a completed directory is left alone.
set -euo pipefail
version="${1:-${KAFKA_VERSION:-4.4.0}}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/.cache/kafka/$version"
if [ -f "$dest/.complete" ]; then exit 0; fi
command -v mvn >/dev/null || { echo "fetch-kafka: mvn not found (apt-get install maven)" >&2; exit 1; }
rm -rf "$dest.tmp"
# Kafka 3.x logs through log4j 1.x (reload4j), 4.x through Log4j2: pom.xml's profiles.
case "$version" in
  3.*) logging=reload4j ;;
  *) logging=log4j2 ;;
esac
echo "fetch-kafka: resolving org.apache.kafka:kafka_2.13:$version ($logging) from Maven Central" >&2
# Pin the plugin: plain `dependency:` under Maven 3.8 resolves the old 2.8 plugin.
mvn -q -B -f "$root/e2e/kafka/pom.xml" "-Dkafka.version=$version" "-Dkafka.logging=$logging" \
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
  -DincludeScope=runtime "-DoutputDirectory=$dest.tmp"
rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.complete"
echo "fetch-kafka: $(ls "$dest" | wc -l) jars in $dest" >&2
