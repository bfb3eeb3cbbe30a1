import protobuf from "protobufjs"
import { type Column, type ColumnType, scalar, type ScalarKind } from "../sinks/Columns.ts"
import { SchemaError } from "./ProtoSchema.ts"

/**
 * A protobuf message type as columns, and the conversion of decoded messages (protobuf.js decodes,
 * with generated code) into column values:
 * - one column per field, named as in the .proto; nested messages are structs, repeated fields lists,
 *   map fields lists of {key, value};
 * - enums are their names (an unknown number is kept as its decimal text);
 * - 64-bit integers are bigints, exact; uint64/fixed64 are unsigned 64-bit columns;
 * - google.protobuf wrappers (UInt32Value, StringValue, ...) are their nullable value;
 * - a field that has presence (message fields, proto3 `optional`, oneof members, proto2) is null when
 *   absent; other scalars read their default, as protobuf defines;
 * - a message type that contains itself cannot be a finite schema: from its second appearance on a
 *   path it is written as a JSON column (protobuf JSON mapping).
 */

type Convert = (value: any) => unknown

interface Plan {
  readonly column: Column
  readonly read: Convert
}

const SIGNED64 = new Set(["int64", "sint64", "sfixed64"])
const UNSIGNED64 = new Set(["uint64", "fixed64"])
const SIGNED32 = new Set(["int32", "sint32", "sfixed32"])
const UNSIGNED32 = new Set(["uint32", "fixed32"])

const WRAPPERS = new Set(
  [
    "DoubleValue",
    "FloatValue",
    "Int64Value",
    "UInt64Value",
    "Int32Value",
    "UInt32Value",
    "BoolValue",
    "StringValue",
    "BytesValue"
  ].map((n) => `.google.protobuf.${n}`)
)

/** A protobuf.js Long (or a number, when decoding left it small) as an exact bigint. */
const longToBigInt = (value: { low: number; high: number } | number, unsigned: boolean): bigint => {
  if (typeof value === "number") return BigInt(value)
  if (value.high === 0) return BigInt(value.low >>> 0)
  const bits = (BigInt(value.high >>> 0) << 32n) | BigInt(value.low >>> 0)
  return unsigned ? bits : BigInt.asIntN(64, bits)
}

const scalarKind = (type: string): ScalarKind => {
  if (SIGNED64.has(type)) return "int64"
  if (UNSIGNED64.has(type)) return "uint64"
  if (SIGNED32.has(type)) return "int32"
  if (UNSIGNED32.has(type)) return "uint32"
  switch (type) {
    case "bool":
      return "boolean"
    case "float":
      return "float"
    case "double":
      return "double"
    case "string":
      return "string"
    case "bytes":
      return "binary"
  }
  throw new SchemaError(`unsupported protobuf field type ${type}`)
}

const scalarConvert = (type: string): Convert => {
  if (SIGNED64.has(type)) return (v) => longToBigInt(v, false)
  if (UNSIGNED64.has(type)) return (v) => longToBigInt(v, true)
  // Copies: protobuf.js returns views of the input, whose buffer the caller may reuse or transfer. An
  // absent proto3 bytes field reads protobuf.js's default (an empty array).
  if (type === "bytes") {
    return (v) => (v instanceof Uint8Array ? Uint8Array.prototype.slice.call(v) : new Uint8Array(v ?? []))
  }
  return (v) => v
}

/** Map keys arrive as strings (64-bit keys as protobuf.js's 8-character hashes). */
const mapKeyConvert = (keyType: string): Convert => {
  if (SIGNED64.has(keyType) || UNSIGNED64.has(keyType)) {
    return (k: string) =>
      longToBigInt(protobuf.util.LongBits.fromHash(k).toLong(UNSIGNED64.has(keyType)) as any, UNSIGNED64.has(keyType))
  }
  if (SIGNED32.has(keyType) || UNSIGNED32.has(keyType)) return (k: string) => Number(k)
  if (keyType === "bool") return (k: string) => k === "true"
  return (k) => k
}

const JSON_OPTIONS: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  bytes: String,
  defaults: false,
  json: true
}

const valuePlan = (
  typeName: string,
  resolved: protobuf.ReflectionObject | null,
  path: ReadonlyArray<string>
): { type: ColumnType; read: Convert } => {
  if (resolved instanceof protobuf.Enum) {
    const names = resolved.valuesById
    return { type: scalar("string"), read: (v: number) => names[v] ?? String(v) }
  }
  if (resolved instanceof protobuf.Type) {
    if (WRAPPERS.has(resolved.fullName)) {
      const inner = resolved.fields.value!
      const convert = scalarConvert(inner.type)
      return { type: scalar(scalarKind(inner.type)), read: (m) => convert(m.value) }
    }
    if (path.includes(resolved.fullName)) {
      const type = resolved
      return { type: scalar("json"), read: (m) => JSON.stringify(type.toObject(m, JSON_OPTIONS)) }
    }
    const plans = messagePlans(resolved, [...path, resolved.fullName])
    return { type: { kind: "struct", fields: plans.map((p) => p.column) }, read: structOf(plans) }
  }
  return { type: scalar(scalarKind(typeName)), read: scalarConvert(typeName) }
}

/**
 * A struct value as one object literal of fixed shape (generated once per message type, as protobuf.js
 * generates its decoders): filling an empty object key by key costs twice as much per row.
 */
const structOf = (plans: ReadonlyArray<Plan>): Convert => {
  const body = plans.map((p, i) => `${JSON.stringify(p.column.name)}: r[${i}](m)`).join(", ")
  return new Function("r", `return function(m) { return { ${body} } }`)(plans.map((p) => p.read)) as Convert
}

const fieldPlan = (field: protobuf.Field, path: ReadonlyArray<string>): Plan => {
  field.resolve()
  const name = field.name
  if (field instanceof protobuf.MapField) {
    const key = mapKeyConvert(field.keyType)
    const value = valuePlan(field.type, field.resolvedType, path)
    const entry: ColumnType = {
      kind: "struct",
      fields: [
        { name: "key", type: scalar(scalarKind(field.keyType)), nullable: false },
        { name: "value", type: value.type, nullable: field.resolvedType instanceof protobuf.Type }
      ]
    }
    return {
      column: { name, type: { kind: "list", element: entry }, nullable: true },
      read: (m) => {
        const map = m[name] as Record<string, unknown> | undefined
        if (map == null) return []
        return Object.keys(map).map((k) => ({ key: key(k), value: map[k] == null ? null : value.read(map[k]) }))
      }
    }
  }
  const value = valuePlan(field.type, field.resolvedType, path)
  if (field.repeated) {
    const read = value.read
    return {
      column: { name, type: { kind: "list", element: value.type }, nullable: true },
      read: (m) => (m[name] ?? []).map(read)
    }
  }
  const presence = field.hasPresence || field.resolvedType instanceof protobuf.Type
  const read = value.read
  return {
    column: { name, type: value.type, nullable: true },
    read: presence
      ? (m) => (Object.prototype.hasOwnProperty.call(m, name) && m[name] != null ? read(m[name]) : null)
      : (m) => read(m[name])
  }
}

const messagePlans = (type: protobuf.Type, path: ReadonlyArray<string>): Array<Plan> =>
  type.fieldsArray.map((f) => fieldPlan(f, path))

export interface MessageColumns {
  readonly type: protobuf.Type
  /** one column per field of the message, in field order of the .proto */
  readonly columns: ReadonlyArray<Column>
  /** decodes one blob into one value per column; throws on bytes that are not this message */
  readonly decode: (bytes: Uint8Array) => ReadonlyArray<unknown>
}

export const messageColumns = (type: protobuf.Type): MessageColumns => {
  const plans = messagePlans(type, [type.fullName])
  const reads = plans.map((p) => p.read)
  return {
    type,
    columns: plans.map((p) => p.column),
    decode: (bytes) => {
      const message = type.decode(bytes)
      return reads.map((read) => read(message))
    }
  }
}
