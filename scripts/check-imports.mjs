#!/usr/bin/env node
// Checks the import rules of src/README.md ("Which modules may import which"): each area of src/
// and pipelines/ imports only the areas listed for it, and nothing the encoder thread loads
// (src/encoder/EncoderWorker.ts and what it imports) imports Effect at run time.
// Usage: node scripts/check-imports.mjs   (exit 1 and one line per violation when a rule is broken)
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

/** Which areas each area may import (its own always). */
const allowed = {
  "src/domain": [],
  "src/net": [],
  "src/telemetry": ["src/domain", "src/net"],
  "src/client": ["src/domain", "src/net", "src/telemetry"],
  "src/sinks": ["src/domain"],
  "src/decode": ["src/domain", "src/sinks"],
  "src/encoder": ["src/domain", "src/sinks", "src/decode", "src/telemetry"],
  "src/server": ["src/domain", "src/decode"],
  "src/export": ["src/domain", "src/client", "src/sinks", "src/decode", "src/encoder", "src/telemetry"],
  "src/retention": ["src/domain", "src/client", "src/export", "src/sinks"],
  pipelines: ["src/domain", "src/client", "src/export", "src/retention", "src/sinks", "src/telemetry"],
  "src/cli": ["*"]
}

const areaOf = (file) => {
  const parts = relative(root, file).split(/[\\/]/)
  return parts[0] === "src" ? `src/${parts[1]}` : parts[0]
}

const sources = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.(ts|mjs)$/.test(e.name) ? [join(dir, e.name)] : []
  )

const IMPORT = /^\s*(?:import|export)\s+(type\s+)?([^"';]*?)\s*(?:from\s+)?["']([^"']+)["']/gm
const DYNAMIC = /import\(\s*["']([^"']+)["']\s*\)/g

/** The modules a file imports: `{ spec, typeOnly }` (type-only imports are erased at run time). */
const importsOf = (file) => {
  const text = readFileSync(file, "utf8")
  const found = []
  for (const m of text.matchAll(IMPORT)) {
    const names = /\{([^}]*)\}/.exec(m[2] ?? "")
    const allTypes = names !== null && !/^\s*\w+\s*,/.test(m[2]) &&
      names[1].split(",").map((n) => n.trim()).filter(Boolean).every((n) => n.startsWith("type "))
    found.push({ spec: m[3], typeOnly: m[1] !== undefined || allTypes })
  }
  for (const m of text.matchAll(DYNAMIC)) found.push({ spec: m[1], typeOnly: false })
  return found
}

const violations = []
for (const file of [...sources(join(root, "src")), ...sources(join(root, "pipelines"))]) {
  const from = areaOf(file)
  const may = allowed[from]
  if (may === undefined || may.includes("*")) continue
  for (const { spec } of importsOf(file)) {
    if (!spec.startsWith(".")) continue
    const target = normalize(join(dirname(file), spec))
    const to = areaOf(target)
    if (to === from || !(to.startsWith("src/") || to === "pipelines")) continue
    if (!may.includes(to)) {
      violations.push(
        `${relative(root, file)} imports ${relative(root, target)} (${from} may import ${
          may.join(", ") || "nothing of ours"
        })`
      )
    }
  }
}

const seen = new Set()
const walk = (file) => {
  if (seen.has(file)) return
  seen.add(file)
  for (const { spec, typeOnly } of importsOf(file)) {
    if (typeOnly) continue
    if (spec === "effect" || spec.startsWith("effect/") || spec.startsWith("@effect/")) {
      violations.push(`${relative(root, file)} imports ${spec} and runs on the encoder thread, which loads no Effect`)
    } else if (spec.startsWith(".")) {
      const target = normalize(join(dirname(file), spec))
      if (existsSync(target) && target.endsWith(".ts")) walk(target)
    }
  }
}
walk(join(root, "src", "encoder", "EncoderWorker.ts"))

for (const v of violations) console.log(v)
console.log(`${violations.length} violation(s); ${seen.size} modules on the encoder thread.`)
process.exitCode = violations.length === 0 ? 0 : 1
