// Preloaded (`node --expose-gc --import <this file> ...`) by tests that need the garbage collector to
// run while a program works: a full collection every 50 ms, and at exit one line on stderr saying how
// many collections ran, `gc-often: N collections`.
import { constants, PerformanceObserver } from "node:perf_hooks"

if (typeof globalThis.gc !== "function") throw new Error("gc-often.mjs needs node --expose-gc")
let collections = 0
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) collections++
}).observe({ entryTypes: ["gc"] })
setInterval(() => globalThis.gc(), 50).unref()
process.on("exit", () => process.stderr.write(`gc-often: ${collections} collections\n`))
