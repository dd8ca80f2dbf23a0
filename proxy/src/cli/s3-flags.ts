// The `--s3-*` flag definitions moved to the store layer (store/s3-options.ts); the commands in
// cli/ keep importing them from here.
export {
  type FlagErrorSink,
  s3EncryptionFlagOptions,
  s3FlagOptions,
} from '../store/s3-options.js';
