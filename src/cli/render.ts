import * as Console from "effect/Console"
import * as Effect from "effect/Effect"

/**
 * How a command shows a result on stdout (logs and progress go to stderr): one JSON document with
 * `--json`, else lines for a person, which on a terminal may say more (a table) than in a file or
 * a pipe, where cron mail and scripts read them.
 */
export interface Renderer<A> {
  /** The result as one JSON document, printed on one line; undefined when `--json` prints nothing of it. */
  readonly json: (result: A) => unknown
  /** The result as lines of text; `terminal` when stdout is one. */
  readonly text: (result: A, terminal: boolean) => ReadonlyArray<string>
}

/** Whether stdout is a terminal: the one place commands ask. */
export const stdoutIsTerminal = () => process.stdout.isTTY === true

/** Whether a person is at a terminal who can answer a question (stdin and stderr are terminals): never under cron. */
export const canAsk = () => process.stdin.isTTY === true && process.stderr.isTTY === true

/** Asks a yes/no question on stderr; true only for "y" or "yes". */
export const confirm = (question: string): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    const { createInterface } = await import("node:readline/promises")
    const prompt = createInterface({ input: process.stdin, output: process.stderr })
    try {
      return /^y(es)?$/i.test((await prompt.question(`${question} [y/N] `)).trim())
    } finally {
      prompt.close()
    }
  })

/** Listings and documents of the inspection commands: JSON when asked, and whenever stdout is not a terminal. */
export const wantsJson = (flag: boolean) => flag || !stdoutIsTerminal()

/** Prints a result as its renderer says: JSON when asked, else its lines. */
export const render = <A>(renderer: Renderer<A>, result: A, json: boolean): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (json) {
      const document = renderer.json(result)
      return document === undefined ? Effect.void : Console.log(JSON.stringify(document))
    }
    const lines = renderer.text(result, stdoutIsTerminal())
    return lines.length === 0 ? Effect.void : Console.log(lines.join("\n"))
  })
