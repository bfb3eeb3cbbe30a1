import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import { UsageError } from "../domain/ExitCode.ts"
import { TOOL } from "../domain/Tool.ts"
import type { TopLevelCommand } from "./commands.ts"
import { CATALOG_VERSION_FLAG, versionWithoutValue } from "./help.ts"
import { unknownWord } from "./Suggest.ts"

const base = Command.make(TOOL.name).pipe(
  Command.withDescription(
    "Export data catalogs to Parquet and Arrow, and run a local catalog service to develop against."
  )
)

/** `catalog-export` with the given commands under it (commands.ts says which the arguments need). */
export const rootCommand = (subcommands: ReadonlyArray<TopLevelCommand>): TopLevelCommand =>
  Arr.isNonEmptyReadonlyArray(subcommands) ? Command.withSubcommands(base, subcommands) : base

/**
 * What is wrong with the arguments (after `catalog-export`, as forParser gives them) before
 * @effect/cli's parser sees them: a mistyped command or flag, named with the nearest known ones
 * (the parser's answer lists every command, or only says "unknown argument"), or a catalog
 * `--version` without a value.
 */
export const mistakeIn = (root: TopLevelCommand, args: ReadonlyArray<string>): string | undefined =>
  unknownWord(root, args) ?? versionWithoutValue(args)

/**
 * The arguments parsed as @effect/cli will parse them, so that what it would print of a bad value
 * (`--format csv`) is printed by main.ts instead, as every error is: one `catalog-export: ` line.
 */
export const parseArgs = (root: TopLevelCommand, args: ReadonlyArray<string>) =>
  Descriptor.parse(root.descriptor, [TOOL.name, ...args], CliConfig.defaultConfig).pipe(
    Effect.catchIf(
      (e) => !ValidationError.isHelpRequested(e),
      (e) =>
        new UsageError({
          message: HelpDoc.toAnsiText(e.error).trim().replace(/\n+/g, " ").replaceAll(
            `--${CATALOG_VERSION_FLAG}`,
            "--version"
          )
        })
    )
  )
