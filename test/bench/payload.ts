/** Deterministic protobuf-like payloads (about 2:1 under zstd), shared by the benchmarks. */

/** xorshift32: fast deterministic numbers */
export const random = (seed: number) => {
  let x = seed | 0 || 1
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return x >>> 0
  }
}

const WORDS =
  "road lane speed limit tunnel bridge ferry toll name street avenue city district country height width weight restriction access truck car bicycle pedestrian turn left right sign lights"
    .split(" ")

/** Protobuf-like payload: field tags, small varints (delta-coded coordinates), words and some noise. */
export const makePayload = (size: number, seed: number): Uint8Array => {
  const next = random(seed)
  const out = new Uint8Array(size)
  let i = 0
  while (i < size) {
    const kind = next() % 10
    if (kind < 4) {
      const word = WORDS[next() % WORDS.length]!
      out[i++] = 0x12
      out[i++] = word.length
      for (let k = 0; k < word.length && i < size; k++) out[i++] = word.charCodeAt(k)
    } else if (kind < 8) {
      out[i++] = 0x08
      let v = next() % 2000
      while (v > 0x7f && i < size) {
        out[i++] = (v & 0x7f) | 0x80
        v >>>= 7
      }
      if (i < size) out[i++] = v
    } else {
      for (let k = 0; k < 6 && i < size; k++) out[i++] = next() & 0xff
    }
  }
  return out
}
