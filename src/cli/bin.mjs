#!/usr/bin/env node
// The `catalog-export` command: runs the bundle in dist/, which the package ships (built by
// `prepare`). Nothing here writes into an installed package. Only in a checkout (the TypeScript
// sources beside this file) is the bundle rebuilt when a source is newer, so that editing and
// running need no build step; `npm install` builds it the first time.
import { existsSync } from "node:fs"
import module from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

// The Node lines the package supports (package.json "engines"); older ones fail later in ways that
// name neither the cause nor the fix (the local service's node:sqlite needs 22.16).
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < 22 || major === 23 || (major === 22 && minor < 16)) {
  process.stderr.write(
    `catalog-export: Node.js ${process.versions.node} is not supported; run it with Node.js 24 or 22 (22.16 or later).\n`
  )
  process.exit(1)
}

// V8's compiled code cached under the temporary directory makes later starts faster.
module.enableCompileCache()

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const bundle = join(root, "dist", "catalog-export.mjs")

if (existsSync(join(root, "src", "cli", "main.ts")) && existsSync(join(root, "scripts", "build.mjs"))) {
  const { build, isStale } = await import(pathToFileURL(join(root, "scripts", "build.mjs")).href)
  if (isStale()) await build()
} else if (!existsSync(bundle)) {
  process.stderr.write(
    `catalog-export: ${bundle} is missing; this installation is incomplete, install the package again.\n`
  )
  process.exit(1)
}

await import(pathToFileURL(bundle).href)
