import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { MERGE_BELOW_BYTES, mergeSmallFiles } from "../../src/export/Merging.ts"
import { destination } from "../../src/sinks/Destination.ts"
import type { RecordedFile } from "../../src/sinks/WrittenFile.ts"
import { tempDir } from "./support.ts"

/**
 * Merging.ts's size rule, in this process; merging itself (files read back by DuckDB and apache-arrow,
 * a kill while merging) is tested through the CLI in fileSizes.test.ts.
 */

const MiB = 1024 * 1024
const file = (path: string, bytes: number, rows = 10): RecordedFile => ({
  path,
  format: "parquet",
  rows,
  bytes,
  sha256: "0".repeat(64)
})

describe("mergeSmallFiles", () => {
  it.scoped("files of 4 MiB or more stay as their parts wrote them, though below half of --max-file-bytes", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const dest = yield* destination(dir)
      // Parts' files of 62 MiB (bench section 4's shape) and 8.5 MB (section 2's), one of 4 MiB, a small tail and an
      // empty file.
      const files = [
        file("part-0-r-00000.parquet", 62 * MiB),
        file("part-1-r-00000.parquet", 8_500_000),
        file("part-2-r-00000.parquet", MERGE_BELOW_BYTES),
        file("part-3-r-00000.parquet", 2 * MiB),
        file("part-3-r-00001.parquet", 400, 0)
      ]
      // None of these files exists: had any two of them been chosen for merging, reading them would fail.
      const kept = yield* mergeSmallFiles(dest, ".", files, {
        maxFileBytes: 256 * MiB,
        name: (seq) => `part-s0-r-${seq}`
      })
      expect(kept.map((f) => f.path)).toEqual(files.slice(0, 4).map((f) => f.path))
    }))
})
