// What the producer's zone side of zone-local produce counts (zone-produce.ts): /counters shows
// it as zone.produce.references, telemetry/zone-metrics.ts exports it.

/** Why a partition's batch went to the leader as bytes. */
export interface ZoneProduceBytesReasons {
  /** The topic is not `zone.local`. */
  notZoneLocal: number;
  /** Produce v13 named the topic by an id this sidecar's broker has not named yet (a refresh is under way). */
  unknownTopicId: number;
  /** The connection's first Produce of the topic, or the last one was refused: the leader decides first. */
  notAcceptedYet: number;
  /** acks=0: no answer could tell the producer to retry. */
  acksZero: number;
  /** Not exactly one complete, CRC-valid magic v2 batch: the broker judges it as sent. */
  notOneBatch: number;
  /** The WAL store is degraded (StoreHealth), or refused the batch. */
  storeUnusable: number;
  /** The store write failed or took longer than storeTimeoutMs. */
  storeFailed: number;
  /** The leader could not fill a reference lately: bytes for fallbackMs. */
  leaderFallback: number;
  /**
   * This connection got a refusal that may have been of an unfilled reference (Produce < v8 says
   * no more than INVALID_RECORD / CORRUPT_MESSAGE): its requests go as bytes for fallbackMs.
   */
  connectionFallback: number;
  /**
   * The connection's SASL login is not (yet) accepted by the broker, or was refused: who the
   * broker will authorize is not known, so nothing of it is stored.
   */
  notAuthenticated: number;
  /** The leader is in our own zone: its bytes cross no zone. */
  sameZone: number;
  /** Produce versions outside 3–13. */
  unsupportedVersion: number;
}

export interface ZoneProduceStats {
  requestsReferenced: number;
  batchesReferenced: number;
  /** Bytes of the batches sent as references: what did not cross the zone link. */
  bytesReferenced: number;
  batchesAsBytes: ZoneProduceBytesReasons;
  /** Leaders that answered a reference as not filled (NOT_ENOUGH_REPLICAS, or INVALID_RECORD from a broker that got it). */
  fallbacksStarted: number;
  /** Connections that went to bytes after an INVALID_RECORD / CORRUPT_MESSAGE that may have been an unfilled reference. */
  connectionFallbacksStarted: number;
  /** Produce requests the codec could not read: forwarded as the client sent them, for the broker to judge. */
  requestsNotDecoded: number;
  /** Produce requests decided only once the connection's pending SASL login was answered. */
  requestsHeldForLogin: number;
  /** INVALID_RECORD / CORRUPT_MESSAGE for an unfilled reference, answered NOT_ENOUGH_REPLICAS so the producer retries. */
  refusalsRewritten: number;
  /** Client-sent partitions that looked like references, changed so that no leader ever fills them. */
  clientReferencesNeutralized: number;
  /** Wait for the store write of a referenced request: sum, count and maximum, milliseconds. */
  storeMsTotal: number;
  storeCount: number;
  storeMsMax: number;
}

/** Every counter at zero. */
export function newZoneProduceStats(): ZoneProduceStats {
  return {
    requestsReferenced: 0,
    batchesReferenced: 0,
    bytesReferenced: 0,
    batchesAsBytes: {
      notZoneLocal: 0,
      unknownTopicId: 0,
      notAcceptedYet: 0,
      acksZero: 0,
      notOneBatch: 0,
      storeUnusable: 0,
      storeFailed: 0,
      leaderFallback: 0,
      connectionFallback: 0,
      notAuthenticated: 0,
      sameZone: 0,
      unsupportedVersion: 0,
    },
    fallbacksStarted: 0,
    connectionFallbacksStarted: 0,
    requestsNotDecoded: 0,
    requestsHeldForLogin: 0,
    refusalsRewritten: 0,
    clientReferencesNeutralized: 0,
    storeMsTotal: 0,
    storeCount: 0,
    storeMsMax: 0,
  };
}
