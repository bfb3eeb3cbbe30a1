import { geojsonToWkb } from "hyparquet-writer"

/**
 * GeoJSON blobs as rows of features, geometries as ISO WKB, and the GeoParquet 1.1 file metadata
 * (`geo`) that readers such as DuckDB spatial, GeoPandas and QGIS use to find and type them.
 */

export interface Feature {
  readonly id: string | null
  readonly wkb: Uint8Array | null
  /** the properties object as JSON text, or null */
  readonly properties: string | null
}

interface Geometry {
  readonly type: string
  readonly coordinates?: unknown
  readonly geometries?: ReadonlyArray<Geometry>
}

const GEOMETRY_TYPES = new Set([
  "Point",
  "LineString",
  "Polygon",
  "MultiPoint",
  "MultiLineString",
  "MultiPolygon",
  "GeometryCollection"
])

/** Geometry types and bounding box of the geometries written to one file. */
export class GeoStats {
  readonly types = new Set<string>()
  minX = Infinity
  minY = Infinity
  maxX = -Infinity
  maxY = -Infinity

  add(geometry: Geometry): void {
    let dims = 2
    const visit = (c: unknown): void => {
      if (!Array.isArray(c)) return
      if (typeof c[0] === "number") {
        const [x, y] = c as [number, number]
        if (x < this.minX) this.minX = x
        if (x > this.maxX) this.maxX = x
        if (y < this.minY) this.minY = y
        if (y > this.maxY) this.maxY = y
        if (c.length > dims) dims = c.length
        return
      }
      for (const inner of c) visit(inner)
    }
    const walk = (g: Geometry): void => {
      if (g.type === "GeometryCollection") { for (const inner of g.geometries ?? []) walk(inner) }
      else visit(g.coordinates)
    }
    walk(geometry)
    this.types.add(dims >= 3 ? `${geometry.type} Z` : geometry.type)
  }

  merge(other: GeoStats): void {
    for (const t of other.types) this.types.add(t)
    this.minX = Math.min(this.minX, other.minX)
    this.minY = Math.min(this.minY, other.minY)
    this.maxX = Math.max(this.maxX, other.maxX)
    this.maxY = Math.max(this.maxY, other.maxY)
  }
}

/** The GeoParquet 1.1 `geo` key-value metadata for a file whose geometry column is `column`. */
export const geoParquetMetadata = (column: string, stats: GeoStats): string =>
  JSON.stringify({
    version: "1.1.0",
    primary_column: column,
    columns: {
      [column]: {
        encoding: "WKB",
        geometry_types: [...stats.types].sort(),
        ...(stats.minX <= stats.maxX ? { bbox: [stats.minX, stats.minY, stats.maxX, stats.maxY] } : {})
      }
    }
  })

const isGeometry = (g: unknown): g is Geometry =>
  typeof g === "object" && g !== null && GEOMETRY_TYPES.has((g as Geometry).type) &&
  ((g as Geometry).type === "GeometryCollection"
    ? Array.isArray((g as Geometry).geometries)
    : Array.isArray((g as Geometry).coordinates))

const featureOf = (value: unknown, stats: GeoStats, index: number): Feature => {
  const f = value as { type?: unknown; id?: unknown; geometry?: unknown; properties?: unknown }
  if (typeof f !== "object" || f === null || f.type !== "Feature") {
    throw new Error(`feature ${index} is not a GeoJSON Feature`)
  }
  if (f.geometry !== null && f.geometry !== undefined && !isGeometry(f.geometry)) {
    throw new Error(`feature ${index} has no valid geometry`)
  }
  if (
    f.properties !== null && f.properties !== undefined &&
    (typeof f.properties !== "object" || Array.isArray(f.properties))
  ) {
    throw new Error(`feature ${index}: properties must be an object or null`)
  }
  const geometry = (f.geometry ?? null) as Geometry | null
  if (geometry !== null) stats.add(geometry)
  return {
    id: f.id === undefined || f.id === null ? null : String(f.id),
    wkb: geometry === null ? null : geojsonToWkb(geometry as any),
    properties: f.properties === undefined || f.properties === null ? null : JSON.stringify(f.properties)
  }
}

/** The features of a FeatureCollection, a single Feature, or a bare geometry; throws on anything else. */
export const parseFeatures = (text: string, stats: GeoStats): Array<Feature> => {
  const doc = JSON.parse(text) as { type?: unknown; features?: unknown }
  if (doc?.type === "FeatureCollection") {
    if (!Array.isArray(doc.features)) throw new Error("a FeatureCollection without a features array")
    return doc.features.map((f, i) => featureOf(f, stats, i))
  }
  if (doc?.type === "Feature") return [featureOf(doc, stats, 0)]
  if (isGeometry(doc)) {
    stats.add(doc)
    return [{ id: null, wkb: geojsonToWkb(doc as any), properties: null }]
  }
  throw new Error(`not GeoJSON: the document's type is ${JSON.stringify(doc?.type ?? null)}`)
}
