// Errors of a sidecar's start that its configuration causes.

/** A startup failure that is the operator's to fix (exit code 2), naming the flag. */
export class SidecarConfigError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(`--${flag}: ${message}`);
  }
}
