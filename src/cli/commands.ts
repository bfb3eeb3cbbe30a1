import * as Command from "@effect/cli/Command"
import type { FileSystem } from "@effect/platform/FileSystem"
import type { Path } from "@effect/platform/Path"
import type { Terminal } from "@effect/platform/Terminal"
import type { HasExitCode } from "../domain/ExitCode.ts"
import type { Encoder } from "../encoder/Encoder.ts"
import type { CrashProbe } from "../telemetry/CrashProbe.ts"

/** What main.ts provides to every command. */
export type CommandContext = FileSystem | Path | Terminal | Encoder | CrashProbe

// The name and arguments differ from command to command (the name is a literal type, which makes it
// invariant); what a command may require is checked, and that every error it can fail with says
// its exit code (HasExitCode): one without does not compile.
export type TopLevelCommand = Command.Command<any, CommandContext, HasExitCode, any>

interface CommandModule {
  /** The top-level commands the module defines, in the order help lists them, with what `catalog-export --help` says of each. */
  readonly commands: Readonly<Record<string, string>>
  readonly load: () => Promise<ReadonlyArray<TopLevelCommand>>
}

/**
 * Every top-level command, by the module that defines it. A module is loaded only when one of its
 * commands runs: it brings what that command needs (the HTTP client and undici, the local service,
 * decoders), so `catalog-export export` compiles the export's code and nothing else's. The bundle
 * keeps each module in chunks of its own.
 */
export const commandModules: ReadonlyArray<CommandModule> = [
  {
    commands: { serve: "Run the local catalog service on loopback, to develop and test against." },
    load: () => import("./serve.ts").then((m) => [m.serve])
  },
  {
    commands: { export: "Export one layer version (or a volatile layer's data) to Parquet and/or Arrow." },
    load: () => import("./export.ts").then((m) => [m.exportCommand])
  },
  {
    commands: {
      plan: "Pin a layer version and deal its parts to N shards, for an array job.",
      commit: "Commit a sharded export once every shard has finished."
    },
    load: () => import("./shards.ts").then((m) => [m.planCommand, m.commitCommand])
  },
  {
    commands: { backfill: "Export every version in a range of a versioned layer; safe to re-run." },
    load: () => import("./backfill.ts").then((m) => [m.backfillCommand])
  },
  {
    commands: { retention: "Raise a catalog's minimum version by a policy, past exported versions only." },
    load: () => import("./retention.ts").then((m) => [m.retentionCommand])
  },
  {
    commands: { compact: "Compact a layer's Iceberg table: rewrite mostly deleted files, fold deletes." },
    load: () => import("./compact.ts").then((m) => [m.compactCommand])
  },
  {
    commands: { run: "Run a job config: nightly-export, backfill or retention." },
    load: () => import("./run.ts").then((m) => [m.runCommand])
  },
  {
    commands: { check: "Check a job config (or a catalog, layers, an output) before a run." },
    load: () => import("./check.ts").then((m) => [m.checkCommand])
  },
  {
    commands: { demo: "Start the local service with demo data and run the nightly export against it." },
    load: () => import("./demo.ts").then((m) => [m.demoCommand])
  },
  {
    commands: {
      catalogs: "List, show, create, update and delete catalogs.",
      layers: "List and delete the layers of a catalog.",
      partitions: "List or get partition metadata.",
      versions: "Show the latest and minimum catalog versions, or list them.",
      blob: "Download one blob by its data handle.",
      lookup: "Show the API base URLs the lookup service returns."
    },
    load: () => import("./inspect.ts").then((m) => m.inspectCommands)
  },
  {
    commands: {
      subscriptions: "Manage notification subscriptions of interactive map layers.",
      stream: "Read the messages of a stream layer."
    },
    load: () => import("./admin.ts").then((m) => m.adminCommands)
  },
  {
    commands: { publish: "Publish files into a versioned or volatile layer as one new catalog version." },
    load: () => import("./publish.ts").then((m) => [m.publishCommand])
  },
  {
    commands: { schemas: "Publish, show and list schemas." },
    load: () => import("./schemas.ts").then((m) => [m.schemasCommand])
  },
  {
    commands: { regions: "Take a region of the local service down or bring it back." },
    load: () => import("./regions.ts").then((m) => [m.regionsCommand])
  }
]

/** The names of a module's commands, in the order help lists them. */
export const namesOf = (module: CommandModule) => Object.keys(module.commands)

/**
 * What `catalog-export --help` lists: one line per command with what it is for (as git, gh and
 * rclone list theirs), its flags under `<command> --help`. Bare descriptions: no module is loaded.
 */
const listed = (): ReadonlyArray<TopLevelCommand> =>
  commandModules.flatMap((m) =>
    Object.entries(m.commands).map(([name, summary]) => Command.make(name).pipe(Command.withDescription(summary)))
  )

/**
 * The commands the arguments (after `catalog-export`) can reach: none for `--version`, the list of
 * commands for the top-level help (no arguments, `--help`, `-h`), the named command's module for a
 * known command, and all of them otherwise (completions, the wizard, a mistyped name, which
 * @effect/cli answers with the closest names).
 */
export const commandsFor = async (args: ReadonlyArray<string>): Promise<ReadonlyArray<TopLevelCommand>> => {
  if (args.length === 1 && args[0] === "--version") return []
  if (args.length === 0 || (args.length === 1 && (args[0] === "--help" || args[0] === "-h"))) return listed()
  const named = commandModules.filter((m) => args[0] !== undefined && namesOf(m).includes(args[0]))
  const loaded = await Promise.all((named.length > 0 ? named : commandModules).map((m) => m.load()))
  return loaded.flat()
}
