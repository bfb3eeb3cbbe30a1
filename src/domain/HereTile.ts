/**
 * HERE tile ids (heretile partitioning): a Morton code with a leading 1 bit over a half-quadtree
 * grid of equirectangular tiles. Level L has 2^L columns x 2^(L-1) rows; row 0 is at the south pole.
 * JS numbers are exact up to level 26, which covers every level the platform uses.
 */
export interface TileAddress {
  readonly level: number
  readonly column: number
  readonly row: number
}

export interface BoundingBox {
  readonly west: number
  readonly south: number
  readonly east: number
  readonly north: number
}

export const MAX_LEVEL = 26

const bitLength = (n: number): number => (n === 0 ? 0 : Math.floor(Math.log2(n)) + 1)

export const isValidTileId = (id: number): boolean => {
  if (!Number.isSafeInteger(id) || id < 1) return false
  const bits = bitLength(id)
  if (bits % 2 === 0) return false
  const level = (bits - 1) / 2
  return level <= MAX_LEVEL && id < 1.5 * 4 ** level
}

export const levelOf = (id: number): number => (bitLength(id) - 1) / 2

export const toAddress = (id: number): TileAddress => {
  if (!isValidTileId(id)) throw new RangeError(`${id} is not a valid HERE tile id`)
  const level = levelOf(id)
  let morton = id - 4 ** level
  let column = 0
  let row = 0
  for (let bit = 0; bit < level; bit++) {
    column += (morton % 2) * 2 ** bit
    morton = Math.floor(morton / 2)
    row += (morton % 2) * 2 ** bit
    morton = Math.floor(morton / 2)
  }
  return { level, column, row }
}

export const fromAddress = ({ level, column, row }: TileAddress): number => {
  if (!Number.isInteger(level) || level < 0 || level > MAX_LEVEL) {
    throw new RangeError(`tile level ${level} is out of 0..${MAX_LEVEL}`)
  }
  const columns = 2 ** level
  const rows = level === 0 ? 1 : 2 ** (level - 1)
  if (column < 0 || column >= columns || row < 0 || row >= rows) {
    throw new RangeError(`column ${column} / row ${row} outside the level-${level} grid (${columns} x ${rows})`)
  }
  let morton = 0
  for (let bit = 0; bit < level; bit++) {
    morton += (Math.floor(column / 2 ** bit) % 2) * 4 ** bit
    morton += (Math.floor(row / 2 ** bit) % 2) * 2 * 4 ** bit
  }
  return 4 ** level + morton
}

export const tileSize = (level: number): number => 360 / 2 ** level

export const boundingBox = (id: number): BoundingBox => {
  const { level, column, row } = toAddress(id)
  const size = tileSize(level)
  const west = -180 + column * size
  const south = -90 + row * size
  return { west, south, east: west + size, north: south + size }
}

export const fromCoordinates = (latitude: number, longitude: number, level: number): number => {
  const size = tileSize(level)
  const columns = 2 ** level
  const rows = level === 0 ? 1 : 2 ** (level - 1)
  const clamp = (v: number, max: number) => Math.min(Math.max(v, 0), max - 1)
  return fromAddress({
    level,
    column: clamp(Math.floor((longitude + 180) / size), columns),
    row: clamp(Math.floor((latitude + 90) / size), rows)
  })
}

export const parent = (id: number): number => Math.floor(id / 4)
export const children = (id: number): ReadonlyArray<number> => [0, 1, 2, 3].map((i) => 4 * id + i)

/** Parses a decimal tile id; undefined when the string is not a valid id. */
export const parseTileId = (partition: string): number | undefined => {
  if (!/^[1-9][0-9]{0,16}$/.test(partition)) return undefined
  const id = Number(partition)
  return isValidTileId(id) ? id : undefined
}
