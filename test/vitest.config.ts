import { availableParallelism } from "node:os"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/**
 * Files whose assertions read the machine's timing or memory (an adaptive limit that grows while latency
 * stays flat, peak RSS, memory growth, progress intervals, a service's latency under attack): they run one
 * at a time after the others, with nothing else beside them.
 */
const quiet = [
  "test/export/concurrency.test.ts",
  "test/export/large-blobs.test.ts",
  "test/server/large-listing.test.ts",
  "test/reliability/security.test.ts",
  "test/cli/progress.test.ts"
]

/**
 * Files that move Effect's test clock. The others share their worker's process and loaded modules one after another
 * (`isolate: false`: Effect, the client and the sinks are imported once per worker, not once per file); these run
 * after them in fresh workers, each file with its modules loaded afresh: in a shared worker, Auth.test.ts once found
 * a live clock where its test clock should be ("testClock.adjust is not a function").
 */
const isolated = [
  "test/client/Auth.test.ts",
  "test/client/Http.test.ts",
  "test/client/Lookup.test.ts",
  "test/client/Retry.test.ts"
]

export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    poolOptions: { forks: { isolate: false } },
    // At least two files at a time (vitest's default is one fewer than the cores: one on two cores): most of a
    // file's time is child processes (the CLI, the local service, object stores) and waiting on them.
    // Measured on two cores: vitest ~13.5 min instead of ~20, the cores ~88% busy; sharing workers (isolate: false)
    // took it to ~11.5 min (collecting the files: 21 s instead of 190-205 s).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    minWorkers: 1,
    globalSetup: ["test/globalSetup.ts"],
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: [...quiet, ...isolated],
          sequence: { groupOrder: 0 }
        }
      },
      {
        extends: true,
        test: {
          name: "isolated",
          include: isolated,
          poolOptions: { forks: { isolate: true } },
          sequence: { groupOrder: 0 }
        }
      },
      {
        extends: true,
        test: {
          name: "quiet",
          include: quiet,
          poolOptions: { forks: { singleFork: true } },
          sequence: { groupOrder: 1 }
        }
      }
    ]
  }
})
