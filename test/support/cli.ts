import { execFile } from "node:child_process"
import * as path from "node:path"
import { promisify } from "node:util"
import type { TestService } from "./service.ts"

const run = promisify(execFile)
export const BIN = path.resolve("src/cli/bin.mjs")

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** The real CLI in a child process, pointed at a test service with the given credentials file. */
export const cliFor = (svc: TestService, credentials: string) => async (...args: Array<string>): Promise<CliResult> => {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args, "--lookup-url", svc.lookupUrl, "--credentials", credentials], { maxBuffer: 1 << 26 })
    return { code: 0, stdout, stderr }
  } catch (e) {
    const failure = e as { code: number; stdout: string; stderr: string }
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr }
  }
}
