import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, findOne, run, write } from "./Database.ts"

export const StreamMessageRow = Schema.Struct({
  offset: Schema.Number,
  partition: Schema.String,
  data: Schema.Uint8ArrayFromSelf,
  checksum: Schema.String,
  timestamp: Schema.Number
})
export type StreamMessageRow = typeof StreamMessageRow.Type

export type NewStreamMessage = Omit<StreamMessageRow, "offset">

export const StreamConsumerRow = Schema.Struct({
  id: Schema.String,
  layer_pk: Schema.Number,
  app_id: Schema.String,
  group_id: Schema.String,
  mode: Schema.String,
  position: Schema.Number,
  max_records: Schema.Number,
  created: Schema.Number
})
export type StreamConsumerRow = typeof StreamConsumerRow.Type

const ConsumerGroup = Schema.Struct({ layerPk: Schema.Number, appId: Schema.String, groupId: Schema.String })

/**
 * Stream layers: their messages (one stream partition per layer, so offsets order all messages),
 * consumers with their read position, and offsets committed per consumer group.
 */
export class StreamsRepo extends Context.Tag("catalog-export/server/StreamsRepo")<StreamsRepo, {
  /** Appends messages at the next offsets of the layer (in the caller's transaction). */
  readonly appendMessages: (layerPk: number, messages: ReadonlyArray<NewStreamMessage>) => Effect.Effect<void>
  readonly messagesFrom: (
    layerPk: number,
    offset: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<StreamMessageRow>>
  /** The lowest offset kept and the next offset to be written. */
  readonly messageBounds: (layerPk: number) => Effect.Effect<{ readonly low: number; readonly next: number }>
  readonly insertConsumer: (row: StreamConsumerRow) => Effect.Effect<void>
  readonly consumer: (id: string) => Effect.Effect<StreamConsumerRow | undefined>
  readonly latestConsumer: (
    layerPk: number,
    appId: string,
    mode: string
  ) => Effect.Effect<StreamConsumerRow | undefined>
  readonly setConsumerPosition: (id: string, position: number) => Effect.Effect<void>
  readonly deleteConsumer: (id: string) => Effect.Effect<void>
  /** The next offset the consumer group reads, when it committed one. */
  readonly committedOffset: (layerPk: number, appId: string, groupId: string) => Effect.Effect<number | undefined>
  readonly commitOffset: (layerPk: number, appId: string, groupId: string, nextOffset: number) => Effect.Effect<void>
}>() {
  static readonly layer = Layer.effect(
    StreamsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const messagesFrom = findAll({
        Request: Schema.Struct({ layerPk: Schema.Number, offset: Schema.Number, limit: Schema.Number }),
        Result: StreamMessageRow,
        execute: ({ layerPk, limit, offset }) =>
          sql`SELECT offset, partition, data, checksum, timestamp FROM stream_messages
            WHERE layer_pk = ${layerPk} AND offset >= ${offset} ORDER BY offset LIMIT ${limit}`
      })
      const latestConsumer = findOne({
        Request: Schema.Struct({ layerPk: Schema.Number, appId: Schema.String, mode: Schema.String }),
        Result: StreamConsumerRow,
        execute: ({ appId, layerPk, mode }) =>
          sql`SELECT * FROM stream_consumers WHERE layer_pk = ${layerPk} AND app_id = ${appId} AND mode = ${mode}
            ORDER BY created DESC LIMIT 1`
      })
      const committedOffset = findOne({
        Request: ConsumerGroup,
        Result: Schema.Struct({ next_offset: Schema.Number }),
        execute: ({ appId, groupId, layerPk }) =>
          sql`SELECT next_offset FROM stream_offsets WHERE layer_pk = ${layerPk} AND app_id = ${appId} AND group_id = ${groupId}`
      })
      return StreamsRepo.of({
        appendMessages: (layerPk, messages) =>
          messages.length === 0 ? Effect.void : Effect.gen(function*() {
            const rows = yield* sql<
              { next: number }
            >`SELECT COALESCE(MAX(offset) + 1, 0) AS next FROM stream_messages WHERE layer_pk = ${layerPk}`
            const next = rows[0]!.next
            yield* sql`INSERT INTO stream_messages ${
              sql.insert(messages.map((m, i) => ({
                layer_pk: layerPk,
                offset: next + i,
                partition: m.partition,
                data: m.data,
                checksum: m.checksum,
                timestamp: m.timestamp
              })))
            }`
          }).pipe(Effect.orDie),
        messagesFrom: (layerPk, offset, limit) => messagesFrom({ layerPk, offset, limit }),
        messageBounds: (layerPk) =>
          sql<
            { low: number | null; high: number | null }
          >`SELECT MIN(offset) AS low, MAX(offset) AS high FROM stream_messages WHERE layer_pk = ${layerPk}`
            .pipe(
              Effect.map(([row]) => ({
                low: row?.low ?? 0,
                next: row?.high === null || row?.high === undefined ? 0 : row.high + 1
              })),
              Effect.orDie
            ),
        insertConsumer: write({
          Request: StreamConsumerRow,
          execute: (row) => sql`INSERT INTO stream_consumers ${sql.insert(row)}`
        }),
        consumer: findOne({
          Request: Schema.String,
          Result: StreamConsumerRow,
          execute: (id) => sql`SELECT * FROM stream_consumers WHERE id = ${id}`
        }),
        latestConsumer: (layerPk, appId, mode) => latestConsumer({ layerPk, appId, mode }),
        setConsumerPosition: (id, position) =>
          run(sql`UPDATE stream_consumers SET position = ${position} WHERE id = ${id}`),
        deleteConsumer: (id) => run(sql`DELETE FROM stream_consumers WHERE id = ${id}`),
        committedOffset: (layerPk, appId, groupId) =>
          Effect.map(committedOffset({ layerPk, appId, groupId }), (row) => row?.next_offset),
        commitOffset: (layerPk, appId, groupId, nextOffset) =>
          run(
            sql`INSERT INTO stream_offsets (layer_pk, app_id, group_id, next_offset) VALUES (${layerPk}, ${appId}, ${groupId}, ${nextOffset})
            ON CONFLICT (layer_pk, app_id, group_id) DO UPDATE SET next_offset = excluded.next_offset`
          )
      })
    })
  )
}
