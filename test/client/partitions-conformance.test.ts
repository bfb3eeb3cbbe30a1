/**
 * Partition metadata is decoded two ways: listings stream through PartitionsScanner and
 * MetadataApi's `toPartition` (a partition at a time, resumable), every other answer through the
 * `Partitions` schema of src/domain/Partition.ts (QueryApi, via ApiClient.json). Each document below is
 * served by one scripted platform as a metadata listing and as a query answer, and both clients must
 * come out alike: the same partitions, or the same kind of failure. Each case also pins which.
 */
import { expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ServerResponse } from "node:http"
import { RetryBudgetExhausted } from "../../src/client/Errors.ts"
import { MetadataApi, toPartition } from "../../src/client/MetadataApi.ts"
import { PartitionsScanner } from "../../src/client/PartitionsParser.ts"
import { QueryApi } from "../../src/client/QueryApi.ts"
import type { Partition } from "../../src/domain/Partition.ts"
import { CATALOG, clientLayer, json, platformServer, tokenServer } from "./support.ts"

type Delivery = "whole" | "cut-once" | "cut-chunked-once" | "cut-always" | "ends-early"

interface Case {
  readonly name: string
  /** The document's text (served as UTF-8). */
  readonly body: string
  /** How the server sends it; "whole" unless said. */
  readonly delivery?: Delivery
  readonly contentType?: string
  /** What both clients must end with; an array means these partitions. */
  readonly expected: ReadonlyArray<Record<string, unknown>> | Failure
}

type Failure = "ResponseDecodeError" | "RetryBudgetExhausted after TransportError"

const p = (partition: string, extra: Record<string, unknown> = {}) => ({
  partition,
  version: 4,
  dataHandle: `h-${partition}`,
  ...extra
})
const listing = (partitions: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ partitions, ...extra })
/** One partition whose fields are `fields`, as a document. */
const one = (fields: Record<string, unknown>) => listing([fields])

const ALL_FIELDS = {
  partition: "all",
  version: 7,
  dataHandle: "h-all",
  layer: "roads",
  dataSize: 1024,
  checksum: "da39a3ee5e6b4b0d3255bfef95601890afd80709",
  compressedDataSize: 512,
  crc: "c3f276d7"
}

const cases: ReadonlyArray<Case> = [
  // what the platform sends
  { name: "one partition", body: listing([p("a")]), expected: [p("a")] },
  { name: "no partitions", body: listing([]), expected: [] },
  { name: "every known field", body: listing([ALL_FIELDS]), expected: [ALL_FIELDS] },
  {
    name: "a deleted partition (empty data handle)",
    body: one({ partition: "x", version: 5, dataHandle: "" }),
    expected: [{ partition: "x", version: 5, dataHandle: "" }]
  },
  {
    name: "unknown fields in partitions and the envelope are dropped",
    body: `{"meta":{"partitions":[1],"s":"]}"},"partitions":[${
      JSON.stringify({ ...p("a"), brandNew: { nested: [1, { partition: "no" }] }, flag: null })
    },${JSON.stringify({ zFirst: true, ...p("b") })}],"count":2,"next2":[{}]}`,
    expected: [p("a"), p("b")]
  },
  {
    name: "any key order, whitespace and newlines",
    body: `\r\n { "partitions" : [\n  {"dataHandle" : "h" , "version":\t3, "partition":"z"} \n ] \n}\n `,
    expected: [{ partition: "z", version: 3, dataHandle: "h" }]
  },
  {
    name: "a byte order mark before the document",
    body: `\uFEFF${listing([p("a")])}`,
    expected: [p("a")]
  },
  {
    name: "escapes and non-ASCII text",
    body: `{"partitions":[{"partition":"\\u00e9\\"\\\\ 中 😀","version":1,"dataHandle":"a\\/b"}]}`,
    expected: [{ partition: `é"\\ 中 😀`, version: 1, dataHandle: "a/b" }]
  },
  {
    name: "a next link (followed by the listing, to an empty page)",
    body: listing([p("a")], { next: "/layers/x/partitions?page=2" }),
    expected: [p("a")]
  },
  {
    name: "a content type other than JSON",
    body: listing([p("a")]),
    contentType: "text/plain; charset=utf-8",
    expected: [p("a")]
  },

  // versions
  ...[["-1", -1], ["0", 0], ["4", 4], ["007", 7], [" 12 ", 12], ["9007199254740991", 9007199254740991]].map((
    [text, version]
  ): Case => ({
    name: `version as the string ${JSON.stringify(text)}`,
    body: one({ partition: "v", version: text, dataHandle: "h" }),
    expected: [{ partition: "v", version, dataHandle: "h" }]
  })),
  ...[["-1", -1], ["0", 0], ["1e3", 1000], ["4.0", 4], ["9007199254740991", 9007199254740991]].map((
    [text, version]
  ): Case => ({
    name: `version as the number ${text}`,
    body: `{"partitions":[{"partition":"v","version":${text},"dataHandle":"h"}]}`,
    expected: [{ partition: "v", version, dataHandle: "h" }]
  })),
  ...["4.5", "9007199254740993", "1e400"].map((text): Case => ({
    name: `version as the number ${text} (not an exact integer) is refused`,
    body: `{"partitions":[{"partition":"v","version":${text},"dataHandle":"h"}]}`,
    expected: "ResponseDecodeError"
  })),
  ...["1e3", "0x10", "+5", "1.0", "4.5", "", " ", "abc", "Infinity", "NaN", "1_000", "9007199254740993"].map((
    text
  ): Case => ({
    name: `version as the string ${JSON.stringify(text)} is refused`,
    body: one({ partition: "v", version: text, dataHandle: "h" }),
    expected: "ResponseDecodeError"
  })),
  ...[["null", null], ["true", true], ["an object", {}], ["an array", [1]]].map(([what, version]): Case => ({
    name: `version as ${String(what)} is refused`,
    body: one({ partition: "v", version, dataHandle: "h" }),
    expected: "ResponseDecodeError"
  })),

  // required fields
  { name: "no version", body: one({ partition: "a", dataHandle: "h" }), expected: "ResponseDecodeError" },
  { name: "no partition id", body: one({ version: 1, dataHandle: "h" }), expected: "ResponseDecodeError" },
  {
    name: "a numeric partition id",
    body: one({ partition: 377894440, version: 1, dataHandle: "h" }),
    expected: "ResponseDecodeError"
  },
  { name: "no data handle", body: one({ partition: "a", version: 1 }), expected: "ResponseDecodeError" },
  {
    name: "a null data handle",
    body: one({ partition: "a", version: 1, dataHandle: null }),
    expected: "ResponseDecodeError"
  },
  ...[".", ".."].map((handle): Case => ({
    name: `the data handle ${JSON.stringify(handle)}, which no blob URL can address`,
    body: one({ partition: "a", version: 1, dataHandle: handle }),
    expected: "ResponseDecodeError"
  })),

  // optional fields
  {
    name: "optional fields that are null are absent",
    body: one({ ...p("a"), layer: null, dataSize: null, checksum: null, compressedDataSize: null, crc: null }),
    expected: [p("a")]
  },
  ...[["dataSize", "1024"], ["compressedDataSize", true], ["checksum", 12345], ["crc", ["c3f276d7"]], [
    "layer",
    { id: "roads" }
  ]].map(([field, value]): Case => ({
    name: `${String(field)} of the wrong type is refused`,
    body: one({ ...p("a"), [String(field)]: value }),
    expected: "ResponseDecodeError"
  })),
  {
    name: "large numbers as JSON reads them",
    body:
      `{"partitions":[{"partition":"a","version":1,"dataHandle":"h","dataSize":12345678901234567890,"compressedDataSize":1e300}]}`,
    expected: [{
      partition: "a",
      version: 1,
      dataHandle: "h",
      dataSize: Number("12345678901234567890"),
      compressedDataSize: 1e300
    }]
  },

  // the envelope
  { name: "a null next link is none", body: listing([p("a")], { next: null }), expected: [p("a")] },
  { name: "a next link that is no string", body: listing([p("a")], { next: 5 }), expected: "ResponseDecodeError" },
  { name: "no partitions array", body: `{"next":"/x","count":0}`, expected: "ResponseDecodeError" },
  { name: "an empty object", body: `{}`, expected: "ResponseDecodeError" },
  ...["null", `{"a":1}`, `"none"`, "0"].map((value): Case => ({
    name: `partitions that are ${value}`,
    body: `{"partitions":${value}}`,
    expected: "ResponseDecodeError"
  })),
  ...["1", "null", `"a"`, `[{"partition":"a","version":1,"dataHandle":"h"}]`].map((element): Case => ({
    name: `an element that is ${element}`,
    body: `{"partitions":[${element}]}`,
    expected: "ResponseDecodeError"
  })),

  // not a document
  ...[
    `[{"partition":"a","version":1,"dataHandle":"h"}]`,
    "null",
    `"partitions"`,
    "<html><body>Bad Gateway</body></html>"
  ]
    .map((body): Case => ({ name: `the body ${body.slice(0, 30)}`, body, expected: "ResponseDecodeError" })),
  {
    name: "broken JSON inside a partition",
    body: `{"partitions":[{"partition":"a","version":1,}]}`,
    expected: "ResponseDecodeError"
  },
  {
    name: "data after the end of the document",
    body: `${listing([p("a")])}}`,
    expected: "ResponseDecodeError"
  },
  { name: "two documents", body: `${listing([p("a")])} ${listing([p("b")])}`, expected: "ResponseDecodeError" },

  // truncated on the way
  {
    name: "a body shorter than its Content-Length, then the whole document",
    body: listing([p("a"), p("b"), p("c")]),
    delivery: "cut-once",
    expected: [p("a"), p("b"), p("c")]
  },
  {
    name: "a chunked body cut mid-way, then the whole document",
    body: listing([p("a"), p("b"), p("c")]),
    delivery: "cut-chunked-once",
    expected: [p("a"), p("b"), p("c")]
  },
  {
    name: "a body cut every time",
    body: listing([p("a"), p("b"), p("c")]),
    delivery: "cut-always",
    expected: "RetryBudgetExhausted after TransportError"
  }
]

/**
 * A document that ends cleanly before it is complete (no Content-Length, no error) is where the two
 * differ, by design: a listing is resumable, so its end before the closing brace is a cut connection
 * (resumed, then given up as transient); a one-shot JSON answer that does not parse is a bad answer.
 */
const endsEarly: ReadonlyArray<{ readonly name: string; readonly body: string }> = [
  { name: "a document that ends inside a partition", body: listing([p("a"), p("b")]).slice(0, 60) },
  { name: "a document that ends after its partitions", body: listing([p("a")]).slice(0, -1) },
  { name: "an empty body", body: "" }
]

// --- serving ------------------------------------------------------------------------------------

const send = (res: ServerResponse, c: Case, attempt: number, range: string | undefined) => {
  const body = Buffer.from(c.body, "utf8")
  const delivery = c.delivery ?? "whole"
  const type = { "content-type": c.contentType ?? "application/json" }
  const start = range === undefined ? 0 : Number(/bytes=(\d+)-/.exec(range)?.[1] ?? 0)
  const rest = body.subarray(start)
  const head = start === 0
    ? { status: 200, headers: {} }
    : { status: 206, headers: { "content-range": `bytes ${start}-${body.length - 1}/${body.length}` } }
  const cut = delivery === "cut-always" ||
    (attempt === 1 && (delivery === "cut-once" || delivery === "cut-chunked-once"))
  if (delivery === "ends-early") {
    res.writeHead(head.status, { ...type, ...head.headers })
    return void res.end(rest)
  }
  if (!cut) {
    res.writeHead(head.status, {
      ...type,
      "content-length": rest.length,
      ...head.headers
    })
    return void res.end(rest)
  }
  res.writeHead(head.status, {
    ...type,
    ...(delivery === "cut-chunked-once" ? {} : { "content-length": rest.length }),
    ...head.headers
  })
  res.write(rest.subarray(0, Math.max(1, Math.floor(rest.length / 2))))
  setTimeout(() => res.socket?.destroy(), 20)
}

// --- outcomes -----------------------------------------------------------------------------------

const outcomeOf = <A>(exit: Exit.Exit<ReadonlyArray<A>, unknown>): ReadonlyArray<A> | string => {
  if (Exit.isSuccess(exit)) return exit.value
  if (exit.cause._tag !== "Fail") return `defect: ${String(exit.cause)}`
  const error = exit.cause.error as { readonly _tag?: string }
  return error instanceof RetryBudgetExhausted ? `${error._tag} after ${error.lastError._tag}` : String(error._tag)
}

/** The listing parser alone, fed `text` in pieces of `size` bytes: what MetadataApi makes of it, but for the transport. */
const scanned = (text: string, size: number): ReadonlyArray<Partition> | string => {
  const bytes = new TextEncoder().encode(text)
  const scanner = new PartitionsScanner()
  const out: Array<Partition> = []
  try {
    for (let i = 0; i < bytes.length; i += size) out.push(...scanner.feed(bytes.subarray(i, i + size)).map(toPartition))
  } catch {
    return "ResponseDecodeError"
  }
  return scanner.done ? out : "incomplete"
}

const viaListing = (layer: string) =>
  Effect.flatMap(
    MetadataApi,
    (metadata) => Effect.map(Stream.runCollect(metadata.partitions(CATALOG, layer, { version: 4 })), Chunk.toArray)
  )

const viaQuery = (layer: string) =>
  Effect.flatMap(QueryApi, (query) => query.partitionsById(CATALOG, layer, ["a"], { version: 4 }))

const all: ReadonlyArray<Case> = [
  ...cases,
  ...endsEarly.map((c): Case => ({ ...c, delivery: "ends-early", expected: "ResponseDecodeError" }))
]

/** The client against one platform that serves case `i` as the listing and the query answer of layer `c<i>`. */
const platform = Layer.unwrapScoped(Effect.gen(function*() {
  const attempts = new Map<string, number>()
  const tokens = yield* tokenServer()
  const server = yield* platformServer((url, req, res) => {
    const m = /^\/(metadata|query)\/v1\/catalogs\/[^/]+\/layers\/c(\d+)\/partitions$/.exec(url.pathname)
    // The page a next link leads to.
    if (url.searchParams.has("page")) return json(res, 200, { partitions: [] })
    if (m === null) return false
    const c = all[Number(m[2])]!
    const key = `${m[1]} ${m[2]}`
    const attempt = (attempts.get(key) ?? 0) + 1
    attempts.set(key, attempt)
    send(res, c, attempt, req.headers.range)
  })
  return clientLayer(tokens.tokenUrl, `${server.origin}/lookup/v1`, {
    retry: { baseDelay: 1, maxDelay: 5, maxRetries: 2, maxElapsed: "20 seconds" }
  })
}))

layer(platform, { excludeTestServices: true })(
  "the listing parser (PartitionsScanner, toPartition) and the Partition schema conform",
  (it) => {
    it.effect("the cases have distinct names", () =>
      Effect.sync(() => expect(new Set(all.map((c) => c.name)).size).toBe(all.length)))

    for (const [i, c] of all.entries()) {
      it.effect(c.name, () =>
        Effect.gen(function*() {
          const [listed, queried] = yield* Effect.all([
            Effect.exit(viaListing(`c${i}`)),
            Effect.exit(viaQuery(`c${i}`))
          ], { concurrency: 2 })
          const outcomes = { listing: outcomeOf(listed), query: outcomeOf(queried) }
          if (c.delivery === "ends-early") {
            return expect(outcomes).toEqual({
              listing: "RetryBudgetExhausted after TransportError",
              query: "ResponseDecodeError"
            })
          }
          expect(outcomes.listing, "the listing parser vs the Partition schema").toEqual(outcomes.query)
          expect(outcomes.query).toEqual(c.expected)
          // Where a document's bytes break between reads does not matter.
          if (c.delivery === undefined) {
            for (const size of [1, 7]) expect(scanned(c.body, size), `in pieces of ${size}`).toEqual(c.expected)
          }
        }))
    }
  }
)
