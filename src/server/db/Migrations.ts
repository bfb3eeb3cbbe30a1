import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The local service's SQLite schema, as migrations run once per database by Effect's migrator
 * (which records them in `effect_sql_migrations`). Partition metadata is stored as validity
 * intervals: a row is visible at catalog version V when `vfrom <= V < vto` (vto NULL = still
 * current), so every version stays readable without copying unchanged partitions. A deletion is a
 * row with an empty data handle.
 *
 * Migration 1 is the schema as the service created it at every start before it had migrations,
 * kept with `IF NOT EXISTS`: on a data directory made by that code it creates only what is missing
 * and records itself, so such a directory keeps working. Later changes are new numbered entries;
 * a migration never changes once released.
 */
const initial: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS apps (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL UNIQUE,
    key_secret TEXT NOT NULL,
    user_id TEXT NOT NULL,
    realm TEXT NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY,
    app_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS catalogs (
    hrn TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    owner_app TEXT NOT NULL,
    config TEXT NOT NULL,
    created TEXT NOT NULL,
    latest_version INTEGER NOT NULL DEFAULT -1,
    min_version INTEGER NOT NULL DEFAULT -1
  )`,
  `CREATE TABLE IF NOT EXISTS grants (
    catalog_hrn TEXT NOT NULL,
    app_id TEXT NOT NULL,
    can_read INTEGER NOT NULL,
    can_write INTEGER NOT NULL,
    PRIMARY KEY (catalog_hrn, app_id)
  )`,
  `CREATE TABLE IF NOT EXISTS layers (
    pk INTEGER PRIMARY KEY,
    catalog_hrn TEXT NOT NULL,
    id TEXT NOT NULL,
    layer_type TEXT NOT NULL,
    config TEXT NOT NULL,
    created TEXT NOT NULL,
    UNIQUE (catalog_hrn, id)
  )`,
  `CREATE TABLE IF NOT EXISTS versions (
    catalog_hrn TEXT NOT NULL,
    version INTEGER NOT NULL,
    timestamp INTEGER NOT NULL,
    dependencies TEXT NOT NULL,
    PRIMARY KEY (catalog_hrn, version)
  )`,
  // The versions answer's partitionCounts: per versioned layer, its partitions with data at the version.
  `CREATE TABLE IF NOT EXISTS version_partition_counts (
    catalog_hrn TEXT NOT NULL,
    version INTEGER NOT NULL,
    layer_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (catalog_hrn, version, layer_id)
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS layer_versions (
    layer_pk INTEGER NOT NULL,
    version INTEGER NOT NULL,
    timestamp INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, version)
  )`,
  `CREATE TABLE IF NOT EXISTS partitions (
    layer_pk INTEGER NOT NULL,
    partition TEXT NOT NULL,
    vfrom INTEGER NOT NULL,
    vto INTEGER,
    data_handle TEXT NOT NULL,
    checksum TEXT,
    data_size INTEGER,
    compressed_data_size INTEGER,
    crc TEXT,
    modified INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, partition, vfrom)
  ) WITHOUT ROWID`,
  `CREATE INDEX IF NOT EXISTS partitions_current ON partitions (layer_pk, partition) WHERE vto IS NULL`,
  `CREATE INDEX IF NOT EXISTS partitions_by_handle ON partitions (layer_pk, data_handle)`,
  `CREATE TABLE IF NOT EXISTS blobs (
    layer_pk INTEGER NOT NULL,
    data_handle TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_encoding TEXT,
    owner_version INTEGER,
    PRIMARY KEY (layer_pk, data_handle)
  ) WITHOUT ROWID`,
  `CREATE INDEX IF NOT EXISTS blobs_by_content ON blobs (sha256)`,
  `CREATE TABLE IF NOT EXISTS contents (
    sha256 TEXT PRIMARY KEY,
    pack INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS operations (
    token TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    catalog_hrn TEXT NOT NULL,
    title TEXT NOT NULL,
    state TEXT NOT NULL,
    created INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS publications (
    id TEXT PRIMARY KEY,
    catalog_hrn TEXT NOT NULL,
    app_id TEXT NOT NULL,
    layer_ids TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    message TEXT NOT NULL,
    catalog_version INTEGER NOT NULL,
    dependencies TEXT NOT NULL,
    started INTEGER NOT NULL,
    modified INTEGER NOT NULL,
    expires INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS publication_partitions (
    publication_id TEXT NOT NULL,
    layer_pk INTEGER NOT NULL,
    partition TEXT NOT NULL,
    data_handle TEXT NOT NULL,
    checksum TEXT,
    data_size INTEGER,
    compressed_data_size INTEGER,
    crc TEXT,
    PRIMARY KEY (publication_id, layer_pk, partition)
  ) WITHOUT ROWID`,
  // Catalog administration, notification subscriptions, interactive map features and stream messages.
  /** When a layer id was last deleted in a catalog, for the 60-second delete/create warning. */
  `CREATE TABLE IF NOT EXISTS layer_deletions (
    catalog_hrn TEXT NOT NULL,
    layer_id TEXT NOT NULL,
    deleted_at INTEGER NOT NULL,
    PRIMARY KEY (catalog_hrn, layer_id)
  )`,
  /** Status polls seen per asynchronous operation (an operation answers "pending" at least once). */
  `CREATE TABLE IF NOT EXISTS operation_polls (
    token TEXT PRIMARY KEY,
    polls INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS subscriptions (
    hrn TEXT PRIMARY KEY,
    owner_app TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    source_catalog TEXT NOT NULL,
    source_layer TEXT NOT NULL,
    destination_catalog TEXT NOT NULL,
    destination_layer TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    message TEXT,
    create_token TEXT NOT NULL,
    delete_token TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS subscriptions_by_source ON subscriptions (source_catalog, source_layer)`,
  `CREATE INDEX IF NOT EXISTS subscriptions_by_owner ON subscriptions (owner_app)`,
  /** Answers remembered per `x-idempotency-key`, per application and operation. */
  `CREATE TABLE IF NOT EXISTS idempotency_keys (
    app_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    subscription_hrn TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (app_id, operation, key)
  )`,
  `CREATE TABLE IF NOT EXISTS features (
    layer_pk INTEGER NOT NULL,
    id TEXT NOT NULL,
    feature TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, id)
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS feature_transactions (
    layer_pk INTEGER NOT NULL,
    version INTEGER NOT NULL,
    author TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, version)
  )`,
  /** Stream layer messages; the local service keeps one stream partition (0) per layer, so offsets order all messages. */
  `CREATE TABLE IF NOT EXISTS stream_messages (
    layer_pk INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    partition TEXT NOT NULL,
    data BLOB NOT NULL,
    checksum TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, offset)
  ) WITHOUT ROWID`,
  /** Stream API consumers (`POST .../subscribe`) and their read position. */
  `CREATE TABLE IF NOT EXISTS stream_consumers (
    id TEXT PRIMARY KEY,
    layer_pk INTEGER NOT NULL,
    app_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    position INTEGER NOT NULL,
    max_records INTEGER NOT NULL,
    created INTEGER NOT NULL
  )`,
  /** Committed offsets per consumer group (the next offset to read). */
  `CREATE TABLE IF NOT EXISTS stream_offsets (
    layer_pk INTEGER NOT NULL,
    app_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, app_id, group_id)
  )`,
  // The artifact API: registered artifacts, their files (in SQLite itself, apart from the blob packs,
  // whose garbage collection knows only layer blobs), schemas and grants.
  `CREATE TABLE IF NOT EXISTS artifacts (
    group_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    owner_app TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_id)
  )`,
  `CREATE TABLE IF NOT EXISTS artifact_files (
    group_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    version TEXT NOT NULL,
    file_name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes BLOB NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_id, version, file_name)
  )`,
  `CREATE TABLE IF NOT EXISTS schemas (
    hrn TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    version TEXT NOT NULL,
    name TEXT NOT NULL,
    summary TEXT,
    owner_app TEXT NOT NULL,
    variants TEXT NOT NULL,
    created INTEGER NOT NULL,
    updated INTEGER NOT NULL
  )`,
  /** Read (and write) grants on artifacts and schemas, like catalog grants; `resource` is `group:artifact` or a schema HRN. */
  `CREATE TABLE IF NOT EXISTS artifact_grants (
    resource TEXT NOT NULL,
    app_id TEXT NOT NULL,
    can_read INTEGER NOT NULL,
    can_write INTEGER NOT NULL,
    PRIMARY KEY (resource, app_id)
  )`
]

const statements = (list: ReadonlyArray<string>) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => Effect.forEach(list, (statement) => sql.unsafe(statement), { discard: true })
  )

/**
 * Multipart blob uploads (routes/Multipart.ts): one row per upload; its parts are files under the
 * data directory (Uploads.ts). `parts` is the completed upload's part list (JSON), so a repeated
 * completion is recognised; rows and files go when `touched` is older than the service's expiry.
 */
const multipartUploads: ReadonlyArray<string> = [
  `CREATE TABLE multipart_uploads (
    token TEXT PRIMARY KEY,
    layer_pk INTEGER NOT NULL,
    data_handle TEXT NOT NULL,
    content_type TEXT NOT NULL,
    content_encoding TEXT,
    state TEXT NOT NULL,
    parts TEXT,
    created INTEGER NOT NULL,
    touched INTEGER NOT NULL
  )`,
  `CREATE INDEX multipart_uploads_by_touched ON multipart_uploads (touched)`
]

/** Every migration, by `<id>_<name>`; nothing is read from disk at run time. */
export const migrations = Migrator.fromRecord({
  "0001_initial": statements(initial),
  "0002_multipart_uploads": statements(multipartUploads)
})

/**
 * Runs the migrations not yet applied. `Migrator.make` without `dumpSchema` (SqliteMigrator's adds
 * a `sqlite3 .schema` dump, and with it a platform dependency) writes nothing outside the database.
 */
export const run = Migrator.make({})({ loader: migrations })
