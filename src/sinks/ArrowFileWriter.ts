import {
  AsyncByteQueue,
  Binary,
  type Data,
  type DataType,
  Field,
  Float64,
  Int32,
  Int64,
  makeData,
  RecordBatch,
  RecordBatchFileWriter,
  Schema,
  Struct,
  Utf8
} from "apache-arrow"
import type { ByteOutput } from "./FileOutput.ts"
import { FormatWriter, type FormatWriterOptions } from "./FormatWriter.ts"
import { gather, type Slice, tileColumns, toNullableInt64 } from "./Row.ts"
import { dataAt } from "./RowBatch.ts"

// Binary and Utf8 offsets are int32.
const MAX_BATCH_COLUMN_BYTES = 2 ** 31 - 1

/** Arrow's writer pushes its output into a queue; this one passes every chunk straight to the file. */
export class FileByteQueue extends AsyncByteQueue {
  constructor(private readonly output: ByteOutput) {
    super()
  }

  override write(value: unknown): void {
    if (!ArrayBuffer.isView(value)) throw new TypeError("Arrow writer produced a chunk that is not bytes")
    if (value.byteLength === 0) return
    this.output.write(new Uint8Array(value.buffer, value.byteOffset, value.byteLength))
  }
}

const arrowSchema = (heretile: boolean, metadata: Readonly<Record<string, string>>): Schema => {
  const fields: Array<Field> = [
    new Field("partition", new Utf8(), false),
    new Field("partition_version", new Int64(), false),
    new Field("data_handle", new Utf8(), false),
    new Field("data_size", new Int64(), true),
    new Field("checksum", new Utf8(), true),
    new Field("data", new Binary(), true)
  ]
  if (heretile) {
    for (const name of ["tile_level", "tile_x", "tile_y"]) fields.push(new Field(name, new Int32(), true))
    for (const name of ["tile_west", "tile_south", "tile_east", "tile_north"]) {
      fields.push(new Field(name, new Float64(), true))
    }
  }
  return new Schema(fields, new Map(Object.entries(metadata)))
}

interface Validity {
  readonly nullCount: number
  readonly nullBitmap?: Uint8Array
}

const validity = (values: ReadonlyArray<unknown>): Validity => {
  let nullCount = 0
  for (const value of values) if (value === null) nullCount++
  if (nullCount === 0) return { nullCount }
  const nullBitmap = new Uint8Array(Math.ceil(values.length / 64) * 8)
  values.forEach((value, i) => {
    if (value !== null) nullBitmap[i >> 3]! |= 1 << (i & 7)
  })
  return { nullCount, nullBitmap }
}

interface VariableWidthBuffers extends Validity {
  readonly length: number
  readonly valueOffsets: Int32Array
  readonly data: Uint8Array
}

const variableWidth = (column: string, values: ReadonlyArray<Uint8Array | null>): VariableWidthBuffers => {
  const valueOffsets = new Int32Array(values.length + 1)
  let total = 0
  values.forEach((value, i) => {
    total += value?.byteLength ?? 0
    if (total > MAX_BATCH_COLUMN_BYTES) {
      throw new RangeError(
        `column ${column}: a record batch cannot hold more than 2 GiB in one column; lower rowGroupBytes`
      )
    }
    valueOffsets[i + 1] = total
  })
  const data = new Uint8Array(total)
  values.forEach((value, i) => {
    if (value !== null) data.set(value, valueOffsets[i]!)
  })
  return { length: values.length, ...validity(values), valueOffsets, data }
}

const binary = (column: string, values: ReadonlyArray<Uint8Array | null>): Data<Binary> =>
  makeData({ type: new Binary(), ...variableWidth(column, values) })

const utf8 = (column: string, values: ReadonlyArray<string | null>): Data<Utf8> =>
  makeData({
    type: new Utf8(),
    ...variableWidth(column, values.map((value) => (value === null ? null : Buffer.from(value, "utf8"))))
  })

const fill = <A extends { [index: number]: V }, V>(array: A, values: ReadonlyArray<V | null>): A => {
  values.forEach((value, i) => {
    if (value !== null) array[i] = value
  })
  return array
}

const int64 = (values: ReadonlyArray<bigint | number | null>): Data<Int64> =>
  makeData({
    type: new Int64(),
    length: values.length,
    ...validity(values),
    data: fill(new BigInt64Array(values.length), values.map(toNullableInt64))
  })

const int32 = (values: ReadonlyArray<number | null>): Data<Int32> =>
  makeData({
    type: new Int32(),
    length: values.length,
    ...validity(values),
    data: fill(new Int32Array(values.length), values)
  })

const float64 = (values: ReadonlyArray<number | null>): Data<Float64> =>
  makeData({
    type: new Float64(),
    length: values.length,
    ...validity(values),
    data: fill(new Float64Array(values.length), values)
  })

const recordBatch = (schema: Schema, rows: ReadonlyArray<Slice>, heretile: boolean): RecordBatch => {
  const partitions = gather(rows, (b, i) => b.partition[i]!)
  const children: Array<Data<DataType>> = [
    utf8("partition", partitions),
    int64(gather(rows, (b, i) => b.partitionVersion[i]!)),
    utf8("data_handle", gather(rows, (b, i) => b.dataHandle[i]!)),
    int64(gather(rows, (b, i) => b.dataSize[i]!)),
    utf8("checksum", gather(rows, (b, i) => b.checksum[i]!)),
    binary("data", gather(rows, dataAt))
  ]
  if (heretile) {
    const tiles = tileColumns(partitions)
    children.push(
      int32(tiles.level),
      int32(tiles.x),
      int32(tiles.y),
      float64(tiles.west),
      float64(tiles.south),
      float64(tiles.east),
      float64(tiles.north)
    )
  }
  const struct = makeData({ type: new Struct(schema.fields), length: partitions.length, nullCount: 0, children })
  return new RecordBatch(schema, struct)
}

/** Arrow IPC file format (`.arrow`), one record batch per `rowGroupBytes`. */
export class ArrowFileWriter extends FormatWriter {
  private readonly schema: Schema
  private readonly writer = new RecordBatchFileWriter()

  constructor(options: FormatWriterOptions) {
    super(options)
    this.schema = arrowSchema(options.heretile, options.metadata)
    this.writer.reset(new FileByteQueue(this.output), this.schema)
  }

  protected writeRowGroup(rows: ReadonlyArray<Slice>): void {
    this.writer.write(recordBatch(this.schema, rows, this.options.heretile))
  }

  protected writeFooter(): void {
    this.writer.close()
  }
}
