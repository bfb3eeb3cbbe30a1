#!/usr/bin/env node
// Runs the CLI from one bundle of the TypeScript sources. The bundle is rebuilt with esbuild
// (a fraction of a second) whenever a source file is newer, so there is no build step to forget,
// and Node loads Effect natively instead of through a TypeScript loader (seconds faster to start).
import { existsSync, mkdirSync, readdirSync, renameSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const bundle = join(root, "dist", "catalog-export.mjs")

const newestSource = (dir) => {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs)
  }
  return newest
}

const sources = [join(root, "src"), join(root, "pipelines")].filter(existsSync)
const stale = !existsSync(bundle) ||
  statSync(bundle).mtimeMs < Math.max(statSync(join(root, "package.json")).mtimeMs, ...sources.map(newestSource))

if (stale) {
  const { build } = await import("esbuild")
  const result = await build({
    // The encoder thread (src/sinks/Encoder.ts) loads its own bundle next to the CLI's.
    entryPoints: { "catalog-export": join(root, "src", "cli", "main.ts"), "encoder-worker": join(root, "src", "sinks", "EncoderWorker.ts") },
    outdir: dirname(bundle),
    outExtension: { ".js": ".mjs" },
    // The file writers are loaded when a format is asked for; their chunks sit beside the bundles, so
    // import.meta.url resolves the encoder thread (Encoder.ts) from whichever file holds it.
    splitting: true,
    chunkNames: "[name]-[hash]",
    write: false,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "inline",
    logLevel: "error"
  })
  // Written under private names and renamed, the CLI's last, so concurrent starts never load a half-written file.
  mkdirSync(dirname(bundle), { recursive: true })
  const files = [...result.outputFiles].sort((a) => (a.path === bundle ? 1 : -1))
  for (const file of files) {
    mkdirSync(dirname(file.path), { recursive: true })
    const temp = `${file.path}.${process.pid}.tmp`
    writeFileSync(temp, file.contents)
    renameSync(temp, file.path)
  }
}

await import(pathToFileURL(bundle).href)
