/**
 * The binary single-value serialization of Iceberg (spec "Appendix D"), which manifests use for the
 * lower and upper bounds of a column in a data file. Strings are bounded by their first
 * `STRING_BOUND_LENGTH` characters, as the reference implementation does by default
 * (`write.metadata.metrics.default` truncate(16)): a prefix is a valid lower bound, and the prefix
 * with its last character incremented a valid upper one.
 */

export const STRING_BOUND_LENGTH = 16

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

// Buffers: avsc writes Avro bytes from Buffers only.
const bytes = (size: number, set: (view: DataView) => void): Uint8Array => {
  const out = Buffer.alloc(size)
  set(new DataView(out.buffer, out.byteOffset, out.byteLength))
  return out
}

/** `value` of the primitive `type` as Appendix D stores it; undefined for what it cannot (or need not) store. */
export const serialize = (type: string, value: string | number | boolean | bigint): Uint8Array | undefined => {
  switch (type) {
    case "boolean":
      return typeof value === "boolean" ? Buffer.from([value ? 1 : 0]) : undefined
    case "int":
      return typeof value === "number" && Number.isInteger(value)
        ? bytes(4, (v) => v.setInt32(0, value, true))
        : undefined
    case "long": {
      if (typeof value === "boolean") return undefined
      const n = typeof value === "bigint" ? value : BigInt(value)
      return n < INT64_MIN || n > INT64_MAX ? undefined : bytes(8, (v) => v.setBigInt64(0, n, true))
    }
    case "float":
      return typeof value === "number" ? bytes(4, (v) => v.setFloat32(0, value, true)) : undefined
    case "double":
      return typeof value === "number" ? bytes(8, (v) => v.setFloat64(0, value, true)) : undefined
    case "string":
      return typeof value === "string" ? Buffer.from(value, "utf8") : undefined
    default:
      return undefined
  }
}

/** A lower bound for strings starting with `value`: its first characters. */
export const truncateLower = (value: string): string => {
  const chars = [...value]
  return chars.length <= STRING_BOUND_LENGTH ? value : chars.slice(0, STRING_BOUND_LENGTH).join("")
}

/** An upper bound for strings up to `value`: its first characters, the last incremented; undefined when none is short enough. */
export const truncateUpper = (value: string): string | undefined => {
  const chars = [...value]
  if (chars.length <= STRING_BOUND_LENGTH) return value
  const prefix = chars.slice(0, STRING_BOUND_LENGTH).map((c) => c.codePointAt(0)!)
  for (let i = prefix.length - 1; i >= 0; i--) {
    let next = prefix[i]! + 1
    if (next >= 0xd800 && next <= 0xdfff) next = 0xe000
    if (next <= 0x10ffff) return String.fromCodePoint(...prefix.slice(0, i), next)
  }
  return undefined
}
