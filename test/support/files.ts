import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"

export const sha1 = (bytes: Uint8Array | string): string => createHash("sha1").update(bytes).digest("hex")

export const sha256File = (file: string): string => createHash("sha256").update(fs.readFileSync(file)).digest("hex")

export const readJson = <T = any>(file: string): T => JSON.parse(fs.readFileSync(file, "utf8")) as T

/** Every file below `dir`, relative, sorted. */
export const filesBelow = (dir: string): Array<string> => {
  if (!fs.existsSync(dir)) return []
  if (!fs.statSync(dir).isDirectory()) return ["(a file)"]
  const out: Array<string> = []
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name)
      if (entry.isDirectory()) walk(full)
      else out.push(path.relative(dir, full))
    }
  }
  walk(dir)
  return out.sort()
}

/** Undo actions run after the file's tests, newest first, and a temporary directory maker that registers its removal. */
export const cleanups = () => {
  const cleanup: Array<() => Promise<void> | void> = []
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f()
  })
  const tempDir = (prefix: string) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    return dir
  }
  return { cleanup, tempDir }
}
