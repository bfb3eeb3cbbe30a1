import protobuf from "protobufjs"
import descriptor from "protobufjs/ext/descriptor.js"

/**
 * .proto text to a `google.protobuf.FileDescriptorSet` without protoc, and a descriptor set (or .proto
 * text) back to protobuf.js reflection, keeping field names as written (snake_case). protobuf.js parses;
 * the descriptors are built here, one FileDescriptorProto per source file with fully-qualified type
 * names (`.pkg.Msg`), as protoc writes them, because protobuf.js's own `toDescriptor` merges files and
 * writes relative names that stricter readers refuse.
 */

export class SchemaError extends Error {
  override readonly name = "SchemaError"
}

const TYPE: Record<string, number> = {
  double: 1,
  float: 2,
  int64: 3,
  uint64: 4,
  int32: 5,
  fixed64: 6,
  fixed32: 7,
  bool: 8,
  string: 9,
  bytes: 12,
  uint32: 13,
  sfixed32: 15,
  sfixed64: 16,
  sint32: 17,
  sint64: 18
}
const MESSAGE = 11
const ENUM = 14
const LABEL_OPTIONAL = 1
const LABEL_REQUIRED = 2
const LABEL_REPEATED = 3

/** protobuf.js full names start with a dot already (`.pkg.Msg`), as descriptor type names do. */
const typeRef = (t: protobuf.ReflectionObject) => t.fullName

const jsonName = (name: string) => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())

const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1)
const mapEntryName = (field: string) => `${upperFirst(jsonName(field))}Entry`

const scalarField = (name: string, number: number, type: string, resolved: protobuf.ReflectionObject | null) =>
  resolved instanceof protobuf.Type
    ? { name, number, label: LABEL_OPTIONAL, type: MESSAGE, typeName: typeRef(resolved), jsonName: jsonName(name) }
    : resolved instanceof protobuf.Enum
    ? { name, number, label: LABEL_OPTIONAL, type: ENUM, typeName: typeRef(resolved), jsonName: jsonName(name) }
    : { name, number, label: LABEL_OPTIONAL, type: TYPE[type]!, jsonName: jsonName(name) }

const enumDescriptor = (e: protobuf.Enum) => ({
  name: e.name,
  value: Object.entries(e.values).map(([name, number]) => ({ name, number }))
})

const messageDescriptor = (type: protobuf.Type, proto3: boolean): Record<string, unknown> => {
  const nestedType: Array<Record<string, unknown>> = []
  const fields = type.fieldsArray.map((field) => {
    field.resolve()
    if (field instanceof protobuf.MapField) {
      const entry = mapEntryName(field.name)
      const valueType = field.resolvedType
      nestedType.push({
        name: entry,
        field: [scalarField("key", 1, field.keyType, null), scalarField("value", 2, field.type, valueType)],
        options: { mapEntry: true }
      })
      return {
        name: field.name,
        number: field.id,
        label: LABEL_REPEATED,
        type: MESSAGE,
        typeName: `${type.fullName}.${entry}`,
        jsonName: jsonName(field.name)
      }
    }
    const out: Record<string, unknown> = scalarField(field.name, field.id, field.type, field.resolvedType)
    out.label = field.repeated ? LABEL_REPEATED : field.required ? LABEL_REQUIRED : LABEL_OPTIONAL
    if (field.partOf !== null) out.oneofIndex = type.oneofsArray.indexOf(field.partOf)
    if (field.options?.proto3_optional === true) out.proto3Optional = true
    if (!proto3 && field.options?.packed === true) out.options = { packed: true }
    if (proto3 && field.repeated && field.options?.packed === false) out.options = { packed: false }
    if (field.options?.default !== undefined) out.defaultValue = String(field.options.default)
    return out
  })
  for (const nested of type.nestedArray) {
    if (nested instanceof protobuf.Type) nestedType.push(messageDescriptor(nested, proto3))
  }
  return {
    name: type.name,
    field: fields,
    nestedType,
    enumType: type.nestedArray.filter((n): n is protobuf.Enum => n instanceof protobuf.Enum).map(enumDescriptor),
    oneofDecl: type.oneofsArray.map((o) => ({ name: o.name }))
  }
}

/** The top-level types and enums a file declares, by full name, in declaration order. */
const declared = (ns: protobuf.NamespaceBase, out: Array<string> = []): Array<string> => {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type || nested instanceof protobuf.Enum) out.push(nested.fullName)
    else if (nested instanceof protobuf.Namespace) declared(nested, out)
  }
  return out
}

interface ParsedFile {
  readonly name: string
  readonly pkg: string | undefined
  readonly imports: ReadonlyArray<string>
  readonly proto3: boolean
  readonly declares: ReadonlyArray<string>
}

const PARSE_OPTIONS = { keepCase: true }

/** All files in one root (resolved), plus what each file declares; well-known imports come from protobuf.js. */
const parseAll = (files: Readonly<Record<string, string>>) => {
  const root = new protobuf.Root()
  const parsed: Array<ParsedFile> = []
  const add = (name: string, text: string | undefined, json: protobuf.INamespace | undefined) => {
    try {
      if (text !== undefined) {
        const result = protobuf.parse(text, root, PARSE_OPTIONS)
        const own = protobuf.parse(text, new protobuf.Root(), PARSE_OPTIONS)
        parsed.push({
          name,
          pkg: result.package,
          imports: [...(result.imports ?? []), ...(result.weakImports ?? [])],
          proto3: /^\s*syntax\s*=\s*["']proto3["']/m.test(text),
          declares: declared(own.root)
        })
      } else {
        root.addJSON(json!.nested!)
        const own = protobuf.Root.fromJSON(json!)
        parsed.push({ name, pkg: "google.protobuf", imports: [], proto3: true, declares: declared(own) })
      }
    } catch (e) {
      throw new SchemaError(`${name}: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
  for (const [name, text] of Object.entries(files)) add(name, text, undefined)
  for (let i = 0; i < parsed.length; i++) {
    for (const imported of parsed[i]!.imports) {
      if (files[imported] !== undefined || parsed.some((p) => p.name === imported)) continue
      const wellKnown = protobuf.common.get(imported) as protobuf.INamespace | null
      if (wellKnown === null) {
        throw new SchemaError(`${parsed[i]!.name} imports ${imported}, which is not among the .proto files`)
      }
      add(imported, undefined, wellKnown)
    }
  }
  try {
    root.resolveAll()
  } catch (e) {
    throw new SchemaError(e instanceof Error ? e.message : String(e))
  }
  return { root, parsed }
}

/** Compiles .proto sources (keyed by their import path) into FileDescriptorSet bytes, as `protoc --include_imports` would. */
export const compileProto = (files: Readonly<Record<string, string>>): Uint8Array => {
  const { root, parsed } = parseAll(files)
  // Dependencies before dependents, as protoc orders a set (readers build their registry in one pass).
  const ordered: Array<ParsedFile> = []
  const visiting = new Set<ParsedFile>()
  const visit = (file: ParsedFile) => {
    if (ordered.includes(file) || visiting.has(file)) return
    visiting.add(file)
    for (const name of file.imports) {
      const dependency = parsed.find((p) => p.name === name)
      if (dependency !== undefined) visit(dependency)
    }
    ordered.push(file)
  }
  for (const file of parsed) visit(file)
  const set = {
    file: ordered.map((file) => {
      const types = file.declares.map((name) => root.lookup(name)!)
      return {
        name: file.name,
        ...(file.pkg === undefined ? {} : { package: file.pkg }),
        dependency: [...file.imports],
        messageType: types.filter((t): t is protobuf.Type => t instanceof protobuf.Type).map((t) =>
          messageDescriptor(t, file.proto3)
        ),
        enumType: types.filter((t): t is protobuf.Enum => t instanceof protobuf.Enum).map(enumDescriptor),
        syntax: file.proto3 ? "proto3" : "proto2"
      }
    })
  }
  return descriptor.FileDescriptorSet.encode(descriptor.FileDescriptorSet.fromObject(set)).finish()
}

/** Reflection from a compiled descriptor set; field names stay as in the .proto files. */
export const rootFromDescriptorSet = (bytes: Uint8Array): protobuf.Root => {
  try {
    return protobuf.Root.fromDescriptor(bytes, PARSE_OPTIONS)
  } catch (e) {
    throw new SchemaError(`the descriptor set does not decode: ${e instanceof Error ? e.message : String(e)}`)
  }
}

/** Reflection straight from .proto sources, for bundles without a descriptor set. */
export const rootFromProto = (files: Readonly<Record<string, string>>): protobuf.Root => parseAll(files).root

/** The named message type (with or without a leading dot). */
export const messageType = (root: protobuf.Root, name: string): protobuf.Type => {
  const found = root.lookup(name.replace(/^\./, ""))
  if (!(found instanceof protobuf.Type)) throw new SchemaError(`no message ${name} in the schema`)
  return found
}
