import { describe, expect, it } from "@effect/vitest"
import { MalformedListing, PartitionsScanner } from "../../src/client/PartitionsParser.ts"

const encoder = new TextEncoder()

/** Feeds `text` in pieces of `size` bytes and collects what the scanner emits. */
const scan = (text: string, size: number) => {
  const bytes = encoder.encode(text)
  const scanner = new PartitionsScanner()
  const out: Array<unknown> = []
  for (let i = 0; i < bytes.length; i += size) out.push(...scanner.feed(bytes.subarray(i, i + size)))
  return { out, scanner }
}

const partitions = [
  { partition: "1", version: 3, dataHandle: "h-1" },
  { dataHandle: "h-2", partition: "a:b_c.d-e", version: 4, layer: "l", checksum: "abc", dataSize: 10 },
  { version: -1, partition: "quote\"and\\back{[", dataHandle: "", crc: "c3f276d7" },
  {
    partition: "unicode-é-☃-😀",
    version: 1,
    dataHandle: "x",
    extra: { nested: [1, { deep: "]}" }], flag: true, none: null }
  }
]

const tricky = `\uFEFF { "meta" : { "partitions" : [ "not these" ], "s": "\\"]}" } ,
  "count": 4, "flag": false, "nothing": null,
  "partitions" :
  [ ${partitions.map((p) => JSON.stringify(p, null, 1)).join(" ,\n ")} ] ,
  "next" : "/layers/l/partitions?page=\\u0032" , "trailer": [1,2,{"a":"}"}] }  \n`

describe("PartitionsScanner", () => {
  it("finds every element whatever the chunk size, with unknown fields, nesting, escapes and key order", () => {
    for (const size of [1, 2, 3, 5, 7, 64, 100_000]) {
      const { out, scanner } = scan(tricky, size)
      expect(out).toEqual(partitions)
      expect(scanner.done).toBe(true)
      expect(scanner.next).toBe("/layers/l/partitions?page=2")
    }
  })

  it("reads `next` before the partitions and an empty array", () => {
    const { out, scanner } = scan(`{"next":"n1","partitions":[]}`, 4)
    expect(out).toEqual([])
    expect(scanner.next).toBe("n1")
    expect(scanner.done).toBe(true)
  })

  it("a document without next has none", () => {
    const { scanner } = scan(`{"partitions":[{"partition":"1","version":1,"dataHandle":"h"}]}`, 10)
    expect(scanner.next).toBeUndefined()
  })

  it("is not done until the closing brace", () => {
    const { out, scanner } = scan(`{"partitions":[{"partition":"1","version":1,"dataHandle":"h"}]`, 10)
    expect(out).toHaveLength(1)
    expect(scanner.done).toBe(false)
  })

  it("rewinds to the end of the last complete element and continues from there", () => {
    const text =
      `{"partitions":[{"partition":"1","version":1,"dataHandle":"h1"},{"partition":"2","version":1,"dataHandle":"h2"}]}`
    const bytes = encoder.encode(text)
    const cut = text.indexOf(`"h2"`)
    const scanner = new PartitionsScanner()
    const first = scanner.feed(bytes.subarray(0, cut))
    expect(first).toEqual([{ partition: "1", version: 1, dataHandle: "h1" }])
    const resumeAt = scanner.rewind()
    expect(resumeAt).toBe(text.indexOf(`,{"partition":"2"`))
    const rest = scanner.feed(bytes.subarray(resumeAt))
    expect(rest).toEqual([{ partition: "2", version: 1, dataHandle: "h2" }])
    expect(scanner.done).toBe(true)
  })

  it("before the array it rewinds to the end of the last complete top-level value", () => {
    const scanner = new PartitionsScanner()
    scanner.feed(encoder.encode(`{"next":"x","parti`))
    expect(scanner.rewind()).toBe(`{"next":"x"`.length)
    expect(scanner.next).toBe("x")
    const fresh = new PartitionsScanner()
    fresh.feed(encoder.encode(`{"nex`))
    expect(fresh.rewind()).toBe(0)
    expect(fresh.next).toBeUndefined()
  })

  it("rejects what is not a partitions envelope", () => {
    for (
      const text of [`[1,2]`, `{"partitions":[1 2]}`, `{"a" 1}`, `{"partitions":[]} x`, `{"partitions":[{"a":1}} ]}`]
    ) {
      expect(() => scan(text, 3), text).toThrow(MalformedListing)
    }
  })
})
