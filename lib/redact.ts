// The masking of credentials in the text memwal shows: every error message, and every location
// the CLI prints.

import { redactSecrets } from '../native.js'

/**
 * `text` with the secrets a location can carry replaced by `***`: the userinfo of a URI
 * (`s3://KEY:SECRET@bucket` → `s3://***@bucket`) and the values of query parameters that hold
 * credentials (`?secret=`, `sig=`, `token=`, `key=`, `signature=`, `password=`, …). Every error
 * that leaves memwal passes through it, and so does every location the CLI prints, so a
 * location echoed by any layer (core, binding, CLI) never leaks a credential.
 *
 * It is the core's masking (`crates/memwal-core/src/redact.rs`), which the log sinks use too,
 * so errors, the CLI and logs cannot disagree on what is a secret. Called directly rather than
 * through `callSync`: `translate` itself needs it, and it cannot fail for a string.
 */
export function redactLocation(text: string): string {
  return redactSecrets(text)
}
