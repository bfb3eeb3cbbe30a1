// Builds dist/: the CLI bundled from the TypeScript sources with esbuild. Run by `npm run build`,
// by `prepare` (so `npm install` in a checkout and `npm pack` build it), and by src/cli/bin.mjs in a
// checkout whose sources are newer than the bundle. An installed package never builds: it ships dist/.
//
// Every package in package.json's "dependencies" stays external and is loaded from node_modules at
// run time (the native one: zstd-napi); everything else is bundled. Bundling
// Effect instead of importing its barrel at run time is most of the start-up time saved, and code
// splitting keeps what one command needs (the local service, the file writers) in chunks that load
// only when that command runs.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

export const root = join(dirname(fileURLToPath(import.meta.url)), "..")
export const entry = join(root, "dist", "catalog-export.mjs")

/** Inputs of the bundle: when one is newer than it, a checkout rebuilds. */
const inputs = () => [
  join(root, "src"),
  join(root, "pipelines"),
  join(root, "config", "demo.json"),
  join(root, "package.json"),
  join(root, "scripts", "undici-slim.cjs"),
  fileURLToPath(import.meta.url)
]

const newest = (path) => {
  if (!existsSync(path)) return 0
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  let latest = stat.mtimeMs
  for (const name of readdirSync(path)) latest = Math.max(latest, newest(join(path, name)))
  return latest
}

export const isStale = () => !existsSync(entry) || statSync(entry).mtimeMs < Math.max(...inputs().map(newest))

const writeAtomic = (file, contents) => {
  const temp = `${file}.${process.pid}.tmp`
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(temp, contents)
  renameSync(temp, file)
}

/**
 * `undici` (ours and @effect/platform-node's) bundled as the part of it the CLI uses: undici-slim.cjs.
 * Its HTTP/2 client is left out too: every agent of ours sets `allowH2: false` (src/net/Agent.ts), so
 * undici never negotiates HTTP/2, and the client would load node:http2 at every start (~12 ms).
 */
const slimUndici = {
  name: "slim-undici",
  setup(build) {
    build.onResolve({ filter: /^undici$/ }, () => ({ path: join(root, "scripts", "undici-slim.cjs") }))
    build.onResolve(
      { filter: /^\.\/client-h2\.js$/ },
      (args) => (/[\\/]undici[\\/]/.test(args.importer) ? { path: "client-h2", namespace: "undici-no-h2" } : undefined)
    )
    build.onLoad({ filter: /.*/, namespace: "undici-no-h2" }, () => ({
      contents: "module.exports = () => { throw new Error('HTTP/2 is not bundled: catalog-export speaks HTTP/1.1') }",
      loader: "js"
    }))
  }
}

/**
 * `clean`: dist/ holds exactly this build (npm run build, prepare, pack). Otherwise (a checkout
 * rebuilding itself while other runs may be loading the previous bundle) chunks are added beside
 * the old ones, whose content-hashed names never clash, and the entry is replaced last, atomically.
 */
export const build = async ({ clean = false } = {}) => {
  const { build: esbuild } = await import("esbuild")
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
  const result = await esbuild({
    absWorkingDir: root,
    // The encoder thread of exports (src/encoder/Encoder.ts) loads its own bundle beside the CLI's.
    entryPoints: {
      "catalog-export": join(root, "src", "cli", "main.ts"),
      "encoder-worker": join(root, "src", "encoder", "EncoderWorker.ts")
    },
    outdir: join(root, "dist"),
    // Flat: Encoder.ts finds the encoder bundle next to whichever chunk holds it (import.meta.url).
    chunkNames: "[name]-[hash]",
    outExtension: { ".js": ".mjs" },
    write: false,
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node22",
    external: Object.keys(pkg.dependencies ?? {}),
    // Bundled CommonJS packages (undici, ws) call require() for Node's own modules.
    banner: {
      js:
        "import { createRequire as __catalogExportRequire } from 'node:module'; const require = __catalogExportRequire(import.meta.url);"
    },
    sourcemap: "linked",
    sourcesContent: false,
    legalComments: "none",
    minifyWhitespace: true,
    minifySyntax: true,
    logLevel: "error",
    plugins: [slimUndici]
  })
  if (clean) rmSync(join(root, "dist"), { recursive: true, force: true })
  const files = [...result.outputFiles].sort((a, b) => (a.path === entry ? 1 : b.path === entry ? -1 : 0))
  // Entry points have fixed names (the CLI's, and the encoder thread's, which must match its chunks): always written.
  const entries = [entry, join(root, "dist", "encoder-worker.mjs")].flatMap((e) => [e, `${e}.map`])
  for (const file of files) {
    if (!clean && !entries.includes(file.path) && existsSync(file.path)) continue
    writeAtomic(file.path, file.contents)
  }
  return files.map((f) => relative(root, f.path))
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const written = await build({ clean: true })
  process.stderr.write(`dist/: ${written.length} files\n`)
}
