/**
 * The local service's SQLite schema. Partition metadata is stored as validity intervals: a row is
 * visible at catalog version V when `vfrom <= V < vto` (vto NULL = still current), so every version
 * stays readable without copying unchanged partitions. A deletion is a row with an empty data handle.
 */
export const statements: ReadonlyArray<string> = [
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
  ) WITHOUT ROWID`
]
