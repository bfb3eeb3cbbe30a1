import type * as Command from "@effect/cli/Command"
import type * as NodeContext from "@effect/platform-node/NodeContext"
import type { HasExitCode } from "../domain/ExitCode.ts"
import type { Encoder } from "../sinks/Encoder.ts"
import type { CrashProbe } from "../telemetry/CrashProbe.ts"

/** What main.ts provides to every command. */
export type CommandContext = NodeContext.NodeContext | Encoder | CrashProbe

// The name and arguments differ from command to command (the name is a literal type, which makes it
// invariant); what a command may require is checked, and that every error it can fail with says
// its exit code (HasExitCode): one without does not compile.
export type TopLevelCommand = Command.Command<any, CommandContext, HasExitCode, any>

interface CommandModule {
  /** The top-level commands the module defines, in the order help lists them. */
  readonly names: ReadonlyArray<string>
  readonly load: () => Promise<ReadonlyArray<TopLevelCommand>>
}

/**
 * Every top-level command, by the module that defines it. A module is loaded only when one of its
 * commands runs: it brings what that command needs (the HTTP client and undici, the local service,
 * decoders), so `catalog-export export` compiles the export's code and nothing else's. The bundle
 * keeps each module in chunks of its own.
 */
export const commandModules: ReadonlyArray<CommandModule> = [
  { names: ["serve"], load: () => import("./serve.ts").then((m) => [m.serve]) },
  { names: ["export"], load: () => import("./export.ts").then((m) => [m.exportCommand]) },
  { names: ["plan", "commit"], load: () => import("./shards.ts").then((m) => [m.planCommand, m.commitCommand]) },
  { names: ["backfill"], load: () => import("./backfill.ts").then((m) => [m.backfillCommand]) },
  { names: ["retention"], load: () => import("./retention.ts").then((m) => [m.retentionCommand]) },
  { names: ["run"], load: () => import("./run.ts").then((m) => [m.runCommand]) },
  { names: ["check"], load: () => import("./check.ts").then((m) => [m.checkCommand]) },
  { names: ["demo"], load: () => import("./demo.ts").then((m) => [m.demoCommand]) },
  {
    names: ["catalogs", "layers", "partitions", "versions", "blob", "lookup"],
    load: () => import("./inspect.ts").then((m) => m.inspectCommands)
  },
  { names: ["subscriptions", "stream"], load: () => import("./admin.ts").then((m) => m.adminCommands) },
  { names: ["publish"], load: () => import("./publish.ts").then((m) => [m.publishCommand]) },
  { names: ["schemas"], load: () => import("./schemas.ts").then((m) => [m.schemasCommand]) },
  { names: ["regions"], load: () => import("./regions.ts").then((m) => [m.regionsCommand]) }
]

/**
 * The commands the arguments (after `catalog-export`) can reach: none for `--version`, the named
 * command's module for a known command, and all of them otherwise (help, completions, a mistyped
 * name, which @effect/cli answers with the closest names).
 */
export const commandsFor = async (args: ReadonlyArray<string>): Promise<ReadonlyArray<TopLevelCommand>> => {
  if (args.length === 1 && args[0] === "--version") return []
  const named = commandModules.filter((m) => args[0] !== undefined && m.names.includes(args[0]))
  const loaded = await Promise.all((named.length > 0 ? named : commandModules).map((m) => m.load()))
  return loaded.flat()
}
