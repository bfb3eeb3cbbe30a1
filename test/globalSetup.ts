import { execFileSync } from "node:child_process"
import * as path from "node:path"

/**
 * Builds the CLI bundle (dist/) once before the suites start, if a source changed: the tests run the
 * real `catalog-export` hundreds of times, concurrently, and should not all find it stale at once.
 */
export default function setup() {
  execFileSync(process.execPath, [path.join(import.meta.dirname, "..", "src", "cli", "bin.mjs"), "--version"], {
    stdio: "ignore"
  })
}
