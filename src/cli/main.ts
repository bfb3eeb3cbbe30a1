import * as BuiltInOptions from "@effect/cli/BuiltInOptions"
import * as Command from "@effect/cli/Command"
import * as CommandDirective from "@effect/cli/CommandDirective"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { setFlagsFromString } from "node:v8"
import { ExitCode, UsageError } from "../domain/ExitCode.ts"
import { TOOL } from "../domain/Tool.ts"
import { Encoder } from "../encoder/Encoder.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"
import * as Telemetry from "../telemetry/Telemetry.ts"
import { commandsFor } from "./commands.ts"
import { exitCodeOf, interruption, sentenceOf } from "./Exit.ts"
import { forParser, helpText } from "./help.ts"
import { defaultLoggerLayer, plainWhenPiped } from "./Logging.ts"
import { mistakeIn, parseArgs, rootCommand } from "./parse.ts"
import { commandPath } from "./Suggest.ts"

// undici parses HTTP with WebAssembly. After a few responses V8 starts optimising the parser on a
// background thread, and a process that is done waits for that to finish before it exits: ~80 ms of
// a dry run's 0.5 s on 2 cores. Fifty times the default budget (roughly, bytes of WebAssembly run
// before a function is optimised) keeps short commands from starting it, while a long export and
// the snappy codec (WebAssembly too) still get optimised code early (measured: CPU per partition
// and snappy throughput unchanged).
setFlagsFromString("--wasm-tiering-budget=90000000")

// After export, plan or partitions, `--version` is the catalog version (help.ts).
const args = forParser(process.argv.slice(2))

// V8 grows the young generation (where short-lived objects are allocated and collected) whenever
// enough survived its last collections, which any long export reaches: on Node 24 up to three
// semi-spaces of 32 MiB of garbage that still takes memory (peak RSS 256 -> 336 MB from 20,000 to
// 200,000 partitions, bench section 5), each fresh page a page fault. Kept at the size it starts
// with: 193 -> 216 MB, and no more CPU (less, with fewer faults). Unlike --max-semi-space-size,
// which counts only when Node starts, the growth factor is read at each growth, so the command can
// set it. Not for the local service: its requests keep more alive across collections, and its CPU
// per blob GET and per listed partition rose with it (bench section 6, three alternating runs).
if (args[0] !== "serve") setFlagsFromString("--semi-space-growth-factor=1")

const root = rootCommand(await commandsFor(args))

const cli = Command.run(root, { name: TOOL.name, version: TOOL.version })

let exitCode: ExitCode = ExitCode.ok

// A reader that stops early (`| head`) is not an error.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(exitCode)
  throw error
})

const mistake = mistakeIn(root, args)

/** `--help` of a command (help.ts), or the command run by @effect/cli. */
const runOrHelp = Effect.flatMap(
  parseArgs(root, args),
  (directive) =>
    CommandDirective.isBuiltIn(directive) && BuiltInOptions.isShowHelp(directive.option)
      ? Console.log(helpText(commandPath(root, args), directive.option.helpDoc))
      : cli([...process.argv.slice(0, 2), ...args])
)

const program = (mistake === undefined
  ? runOrHelp
  : Effect.fail(new UsageError({ message: mistake }))).pipe(
    Effect.catchAll((error) =>
      Effect.gen(function*() {
        exitCode = exitCodeOf(error)
        // @effect/cli has already printed its own message for parse errors.
        if (!ValidationError.isValidationError(error)) yield* Console.error(`catalog-export: ${sentenceOf(error)}`)
      })
    ),
    // A bug: one line on stderr with the cause (stdout keeps only results).
    Effect.catchAllDefect((defect) =>
      Effect.suspend(() => {
        exitCode = ExitCode.failure
        return Console.error(`catalog-export: unexpected error, please report it: ${Cause.pretty(Cause.die(defect))}`)
      })
    ),
    plainWhenPiped,
    // The encoder thread of exports starts with the first file written there, not with every command.
    // Only the platform services the commands use: NodeContext.layer would load node:child_process and a worker pool
    // at every start too (~15 ms of a dry run).
    Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer, Encoder.auto)),
    // OTLP traces and metrics when OTEL_EXPORTER_OTLP_ENDPOINT asks (loaded only then), flushed at the end.
    Effect.provide(Telemetry.layer),
    // The kill tests' crash points (CATALOG_EXPORT_CRASH_AT); a no-op otherwise.
    Effect.provide(CrashProbe.fromEnv),
    // Until a command installs the logger its flags ask for: stderr, never stdout.
    Effect.provide(defaultLoggerLayer)
  )

NodeRuntime.runMain(program, {
  // Failures are reported above, as one sentence on stderr; runMain's own logger writes to stdout.
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) =>
    onExit(
      Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
        ? Math.max(exitCode, interruption.exitCode)
        : Exit.isFailure(exit) && exitCode === 0
        ? ExitCode.failure
        : exitCode
    )
})
