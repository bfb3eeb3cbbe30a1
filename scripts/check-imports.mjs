#!/usr/bin/env node
// Checks the import rules of src/README.md ("Which modules may import which"): each area of src/
// and pipelines/ imports only the areas listed for it (type imports too), the rules let no two
// areas import each other, no module imports itself through others, and nothing the encoder thread
// loads (src/encoder/EncoderWorker.ts and what it imports) imports Effect at run time.
// Usage: node scripts/check-imports.mjs   (exit 1 and one line per violation when a rule is broken)
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

/** Which areas each area may import (its own always); `*`: every other area. */
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

// The rules themselves: no area may import, directly or through others, an area that may import it.
const mayImport = (area) => allowed[area].includes("*") ? Object.keys(allowed).filter((a) => a !== area) : allowed[area]
/** A loop the rules allow on the way from `area`, if any. */
const loopFrom = (area, path = []) => {
  if (path.includes(area)) return [...path.slice(path.indexOf(area)), area]
  for (const next of mayImport(area)) {
    const loop = loopFrom(next, [...path, area])
    if (loop !== undefined) return loop
  }
  return undefined
}
const ruleLoop = Object.keys(allowed).map((area) => loopFrom(area)).find((loop) => loop !== undefined)
if (ruleLoop !== undefined) violations.push(`the rules let areas import each other: ${ruleLoop.join(" -> ")}`)

const files = [...sources(join(root, "src")), ...sources(join(root, "pipelines"))]
/** Each file's imports of our own modules, resolved. */
const graph = new Map(files.map((file) => [
  file,
  importsOf(file).filter(({ spec }) => spec.startsWith(".")).map(({ spec }) => normalize(join(dirname(file), spec)))
]))

for (const [file, targets] of graph) {
  const from = areaOf(file)
  const may = allowed[from]
  if (may === undefined) {
    violations.push(`${relative(root, file)} is in ${from}, which src/README.md's rules (and this script) do not list`)
    continue
  }
  if (may.includes("*")) continue
  for (const target of targets) {
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

// Modules that import themselves through others (strongly connected components, Tarjan). src/cli's
// own loops (Logging <-> common, export <-> shards) go with its restructuring (issue 21): until
// then a loop wholly inside src/cli is not reported.
const index = new Map()
const low = new Map()
const stack = []
const connect = (file) => {
  index.set(file, index.size)
  low.set(file, index.get(file))
  stack.push(file)
  for (const target of graph.get(file)) {
    if (!graph.has(target)) continue
    if (!index.has(target)) {
      connect(target)
      low.set(file, Math.min(low.get(file), low.get(target)))
    } else if (stack.includes(target)) {
      low.set(file, Math.min(low.get(file), index.get(target)))
    }
  }
  if (low.get(file) !== index.get(file)) return
  const loop = stack.splice(stack.indexOf(file))
  const selfImport = graph.get(file).includes(file)
  if (loop.length > 1 || selfImport) {
    violations.push(`these modules import each other: ${loop.map((f) => relative(root, f)).sort().join(", ")}`)
  }
}
for (const file of graph.keys()) if (!index.has(file)) connect(file)

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
