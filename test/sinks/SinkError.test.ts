import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { fromCause, SinkError } from "../../src/sinks/SinkError.ts"

const errno = (code: string) => Object.assign(new Error(`${code}: failed`), { code })
const file = "/out/cat/layer/version=3/part-0-00000.parquet.partial"

describe("SinkError.fromCause", () => {
  it.each(
    [
      ["ENOSPC", "DiskFull", "Free space"],
      ["EDQUOT", "DiskFull", "quota"],
      ["EACCES", "PermissionDenied", "writable"],
      ["EPERM", "PermissionDenied", "writable"],
      ["EROFS", "ReadOnlyFileSystem", "writable volume"],
      ["ENOENT", "NotFound", "output directory"],
      ["EMFILE", "TooManyOpenFiles", "ulimit"],
      ["EIO", "Io", "Check the output volume"]
    ] as const
  )("maps %s to %s, naming the file and what to do", (code, reason, advice) => {
    const error = fromCause(file, "write", errno(code))
    expect(error).toBeInstanceOf(SinkError)
    expect(error._tag).toBe("SinkError")
    expect(error.reason).toBe(reason)
    expect(error.path).toBe(file)
    expect(error.message).toContain(`Cannot write ${file}`)
    expect(error.message).toContain(advice)
  })

  it("maps a value that does not fit a column to InvalidRow and other errors to Encode", () => {
    expect(fromCause(file, "write", new RangeError("column version: 1.5 is not an integer")).reason).toBe("InvalidRow")
    expect(fromCause(file, "write", new Error("parquet expected bigint value")).reason).toBe("Encode")
  })

  it("maps a module that does not load to Installation, not to the output volume", () => {
    // What Node throws for zstd-napi installed without its build (npm install --ignore-scripts).
    let missing: unknown
    try {
      createRequire(import.meta.url)("./no-such-native-build/binding.node")
    } catch (error) {
      missing = error
    }
    const error = fromCause(file, "create", missing)
    expect(error.reason).toBe("Installation")
    expect(error.message).toContain(
      `Cannot create ${file}: a module catalog-export needs did not load (MODULE_NOT_FOUND`
    )
    expect(error.message).toContain("install catalog-export again")
    expect(error.message).not.toContain("output volume")
    expect(error.message).not.toContain("Require stack")
  })

  it("passes a SinkError through unchanged", () => {
    const original = new SinkError({ path: file, reason: "DiskFull", message: "full" })
    expect(fromCause("/elsewhere", "rename", original)).toBe(original)
  })
})
