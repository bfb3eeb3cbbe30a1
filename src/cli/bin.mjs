#!/usr/bin/env node
// The `catalog-export` command: runs the bundle in dist/, which the package ships (built by
// `prepare`). Nothing here writes into an installed package. Only in a checkout (the TypeScript
// sources beside this file) is the bundle rebuilt when a source is newer, so that editing and
// running need no build step; `npm install` builds it the first time.
import { existsSync } from "node:fs"
import module from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

// Node 22+: V8's compiled code cached under the temporary directory makes later starts faster.
module.enableCompileCache?.()

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
