/**
 * Defaults of the local service that the `serve` command shows in its help before the service
 * itself (SQLite, the HTTP server) is loaded, which only `serve` and `demo` do.
 */
export const SEED_DEFAULTS = { partitions: 2000, versions: 12, blobBytes: 1024 } as const

/** The longest token lifetime the token endpoint grants (24 h, as HERE Account). */
export const MAX_TOKEN_SECONDS = 86_400
