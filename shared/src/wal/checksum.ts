// The WAL format takes its CRC-32C (Castagnoli, the checksum of magic v2 record batches) from the
// records layer: the native implementation where it loads, the pure TypeScript one otherwise.
export { crc32c } from '../records/crc32c.js';
