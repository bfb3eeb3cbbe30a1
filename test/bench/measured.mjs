// Runs a program (the catalog-export bundle, or a script under tsx) in this process and, when the
// process exits, appends its own CPU time and peak RSS as one JSON line to $BENCH_USAGE_FILE.
// The measurement includes start-up, as a user's cron job would pay it.
import * as fs from "node:fs"
import { pathToFileURL } from "node:url"

const [program, ...args] = process.argv.slice(2)
process.on("exit", () => {
  const u = process.resourceUsage()
  fs.appendFileSync(
    process.env.BENCH_USAGE_FILE,
    JSON.stringify({
      userUs: u.userCPUTime,
      systemUs: u.systemCPUTime,
      maxRssKb: u.maxRSS,
      exitCode: process.exitCode ?? 0
    }) + "\n"
  )
})
process.argv = [process.argv[0], program, ...args]
await import(pathToFileURL(program).href)
