/**
 * Incremental scanner for the `{"partitions":[{...},{...}],"next":"..."}` envelope of metadata
 * listings. Bytes are fed as they arrive; each complete element of the top-level `partitions` array
 * is JSON.parse'd on its own, so memory stays bounded by one element however long the listing is.
 *
 * After every complete element the scanner records a checkpoint (absolute byte offset + state), so a
 * cut connection can resume with `Range: bytes=<checkpoint>-` without emitting anything twice.
 */

const enum Mode {
  Document, // before the opening `{`
  KeyOrEnd, // after `{` or `,` in the top-level object
  Key, // inside a top-level key string
  Colon,
  Value, // at the start of a top-level value
  SkipValue, // inside a top-level value other than `partitions`
  AfterValue,
  ElementOrEnd, // after `[` of the partitions array
  CommaOrEnd, // after an element of the partitions array
  Element,
  Done
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const COMMA = 0x2c
const COLON = 0x3a

const isWhitespace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09
const endsScalar = (b: number) => b === COMMA || b === CLOSE_OBJECT || b === CLOSE_ARRAY || isWhitespace(b)

export class MalformedListing extends Error {
  constructor(readonly offset: number, reason: string) {
    super(`malformed partitions listing at byte ${offset}: ${reason}`)
  }
}

const decoder = new TextDecoder("utf-8", { fatal: false })

export class PartitionsScanner {
  /** Absolute offset of the next byte to feed. */
  private offset = 0
  private mode = Mode.Document
  private key = ""
  /**
   * Whether the `partitions` array has begun; the envelope is not complete without it. Never part of a
   * rewind: a checkpoint is marked just after the `[`, and no rewind goes back beyond the last one.
   */
  private listed = false
  private nextLink: string | undefined
  // the checkpoint: where reading resumes after a cut, and the state there
  private checkpointOffset = 0
  private checkpointMode = Mode.Document
  private checkpointNext: string | undefined

  // state of the value being scanned (Key, SkipValue, Element)
  private depth = 0
  private inString = false
  private escaped = false
  private scalar = false
  private capture = false
  private captured: Array<Uint8Array> = []

  /** The `next` link of the envelope, once seen (volatile layers page with it). */
  get next(): string | undefined {
    return this.nextLink
  }

  /** True once the closing `}` of the envelope has been read. */
  get done(): boolean {
    return this.mode === Mode.Done
  }

  /** Forgets everything after the last checkpoint and returns its offset, where reading must resume. */
  rewind(): number {
    this.offset = this.checkpointOffset
    this.mode = this.checkpointMode
    this.nextLink = this.checkpointNext
    this.resetValue()
    return this.offset
  }

  /** Feeds the next bytes of the document; returns the partitions completed by them (parsed, unvalidated). */
  feed(bytes: Uint8Array): Array<unknown> {
    const out: Array<unknown> = []
    const length = bytes.length
    let i = 0
    let valueStart = 0
    // The elements wholly inside these bytes, back to back: parsed at the end with one JSON.parse.
    let runStart = -1
    let runEnd = -1
    while (i < length) {
      const b = bytes[i]!
      switch (this.mode) {
        case Mode.Document: {
          if (b === OPEN_OBJECT) this.mode = Mode.KeyOrEnd
          else if (!isWhitespace(b) && !(this.offset + i < 3 && (b === 0xef || b === 0xbb || b === 0xbf))) {
            throw this.malformed(i, "expected '{'")
          }
          i++
          break
        }
        case Mode.KeyOrEnd: {
          if (b === QUOTE) {
            this.mode = Mode.Key
            this.startValue(true, false)
            valueStart = i
            break
          }
          if (b === CLOSE_OBJECT) this.end(i)
          else if (b !== COMMA && !isWhitespace(b)) {
            throw this.malformed(i, "expected a key")
          }
          i++
          break
        }
        case Mode.Colon: {
          if (b === COLON) this.mode = Mode.Value
          else if (!isWhitespace(b)) throw this.malformed(i, "expected ':'")
          i++
          break
        }
        case Mode.Value: {
          if (isWhitespace(b)) {
            i++
          } else if (this.key === "partitions") {
            if (b !== OPEN_ARRAY) throw this.malformed(i, "\"partitions\" is not an array")
            this.listed = true
            this.mode = Mode.ElementOrEnd
            i++
            this.mark(i)
          } else {
            this.mode = Mode.SkipValue
            this.startValue(this.key === "next", false)
            valueStart = i
          }
          break
        }
        case Mode.AfterValue: {
          if (b === COMMA) this.mode = Mode.KeyOrEnd
          else if (b === CLOSE_OBJECT) this.end(i)
          else if (!isWhitespace(b)) throw this.malformed(i, "expected ',' or '}'")
          i++
          break
        }
        case Mode.ElementOrEnd:
        case Mode.CommaOrEnd: {
          if (b === CLOSE_ARRAY) {
            this.mode = Mode.AfterValue
            i++
            this.mark(i)
          } else if (b === COMMA || isWhitespace(b)) {
            if (b === COMMA) this.mode = Mode.ElementOrEnd
            i++
          } else if (this.mode === Mode.ElementOrEnd) {
            this.mode = Mode.Element
            this.startValue(true, false)
            valueStart = i
          } else {
            throw this.malformed(i, "expected ',' or ']' between partitions")
          }
          break
        }
        case Mode.Element: {
          const end = this.scanValue(bytes, i)
          if (end < 0) {
            this.captured.push(bytes.subarray(valueStart, length))
            i = length
            break
          }
          // Only the first element completed here can have begun in earlier bytes.
          if (this.captured.length > 0) out.push(this.parse(this.takeCaptured(bytes.subarray(valueStart, end)), end))
          else {
            if (runStart < 0) runStart = valueStart
            runEnd = end
          }
          i = end
          this.mode = Mode.CommaOrEnd
          this.mark(i)
          break
        }
        case Mode.Key:
        case Mode.SkipValue: {
          const end = this.scanValue(bytes, i)
          if (end < 0) {
            if (this.capture) this.captured.push(bytes.subarray(valueStart, length))
            i = length
            break
          }
          const text = this.capture ? this.takeCaptured(bytes.subarray(valueStart, end)) : ""
          i = end
          if (this.mode === Mode.Key) {
            this.key = JSON.parse(text) as string
            this.mode = Mode.Colon
          } else {
            if (this.key === "next") {
              const next = this.parse(text, i)
              if (typeof next !== "string" && next !== null) throw this.malformed(i, "\"next\" is not a string")
              this.nextLink = next === null || next === "" ? undefined : next
            }
            this.mode = Mode.AfterValue
            this.mark(i)
          }
          break
        }
        case Mode.Done: {
          if (!isWhitespace(b)) throw this.malformed(i, "unexpected data after the end of the document")
          i++
          break
        }
      }
    }
    if (runStart >= 0) {
      const run = this.parse(`[${decoder.decode(bytes.subarray(runStart, runEnd))}]`, runStart) as Array<unknown>
      for (const element of run) out.push(element)
    }
    this.offset += length
    return out
  }

  /**
   * Advances through the current value from `start`. Returns the index just past the value's last
   * byte, or -1 when the value continues in the next chunk. A scalar ends before its delimiter.
   */
  private scanValue(bytes: Uint8Array, start: number): number {
    const length = bytes.length
    let i = start
    if (this.depth === 0 && !this.inString && !this.scalar) {
      const first = bytes[i]!
      if (first === QUOTE) this.inString = true
      else if (first === OPEN_OBJECT || first === OPEN_ARRAY) this.depth = 1
      else this.scalar = true
      i++
    }
    if (this.scalar) {
      for (; i < length; i++) if (endsScalar(bytes[i]!)) return i
      return -1
    }
    for (; i < length; i++) {
      const b = bytes[i]!
      if (this.inString) {
        if (this.escaped) this.escaped = false
        else if (b === BACKSLASH) this.escaped = true
        else if (b === QUOTE) {
          this.inString = false
          if (this.depth === 0) return i + 1
        }
      } else if (b === QUOTE) this.inString = true
      else if (b === OPEN_OBJECT || b === OPEN_ARRAY) this.depth++
      else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        if (--this.depth === 0) return i + 1
      }
    }
    return -1
  }

  private startValue(capture: boolean, scalar: boolean) {
    this.resetValue()
    this.capture = capture
    this.scalar = scalar
  }

  private resetValue() {
    this.depth = 0
    this.inString = false
    this.escaped = false
    this.scalar = false
    this.capture = false
    this.captured = []
  }

  private takeCaptured(last: Uint8Array): string {
    if (this.captured.length === 0) return decoder.decode(last)
    const parts = [...this.captured, last]
    this.captured = []
    let size = 0
    for (const p of parts) size += p.length
    const joined = new Uint8Array(size)
    let at = 0
    for (const p of parts) {
      joined.set(p, at)
      at += p.length
    }
    return decoder.decode(joined)
  }

  private parse(text: string, index: number): unknown {
    try {
      return JSON.parse(text)
    } catch (e) {
      throw this.malformed(index, e instanceof Error ? e.message : String(e))
    }
  }

  /** The closing brace of the envelope at `index`. */
  private end(index: number) {
    if (!this.listed) throw this.malformed(index, "the document has no \"partitions\" array")
    this.mode = Mode.Done
    this.mark(index + 1)
  }

  private mark(index: number) {
    this.resetValue()
    this.checkpointOffset = this.offset + index
    this.checkpointMode = this.mode
    this.checkpointNext = this.nextLink
  }

  private malformed(index: number, reason: string) {
    return new MalformedListing(this.offset + index, reason)
  }
}
