import * as CliConfig from "@effect/cli/CliConfig"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { describe, expect, it } from "vitest"
import { BackfillJob } from "../../pipelines/backfill.ts"
import { NightlyJob } from "../../pipelines/nightly-export.ts"
import { checkSettings, settingFlags } from "../../src/cli/exporting.ts"
import { defaults, ExportSettings } from "../../src/export/Settings.ts"

/**
 * The export settings are one schema (src/export/Settings.ts): job configs decode it, the flags of
 * export and backfill are derived from it, and both come out with the same defaults.
 */

const flagsFor = (args: ReadonlyArray<string>) =>
  Options.processCommandLine(Options.all(settingFlags), args, CliConfig.defaultConfig).pipe(
    Effect.flatMap(([error, leftover, flags]) =>
      Option.isSome(error) ? Effect.fail(error.value) : Effect.succeed({ leftover, flags })
    ),
    Effect.provide(NodeContext.layer)
  )

/** The settings the flags ask for, or the sentence of the first error (the parser's or the range check's). */
const settingsOf = (args: ReadonlyArray<string>) =>
  Effect.runPromise(
    flagsFor(args).pipe(
      Effect.flatMap(({ flags }) => checkSettings(flags)),
      Effect.mapError((e) => (ValidationError.isValidationError(e) ? HelpDoc.toAnsiText(e.error).trim() : e.message)),
      Effect.either
    )
  )

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)

describe("the export settings", () => {
  it("have a flag each, named after the setting", () => {
    const fields = Object.keys(ExportSettings.fields)
    expect(Object.keys(settingFlags).sort()).toEqual([...fields].sort())
    for (const key of fields) {
      const flag: Options.Options<unknown> = settingFlags[key as keyof typeof settingFlags]
      const help = HelpDoc.toAnsiText(Options.getHelp(flag))
      expect(help, key).toContain(`--${kebab(key)}`)
    }
  })

  it("take the schema's defaults from no flags, as from a job config that gives none", async () => {
    const fromFlags = await settingsOf(["--out", "/tmp/x"])
    expect(fromFlags).toEqual(Either.right({ out: "/tmp/x", ...defaults }))
    expect(defaults).toEqual({
      format: "parquet",
      compression: "zstd",
      // No concurrency: found as the export runs, up to maxConcurrency.
      maxConcurrency: 1024,
      listConcurrency: 4,
      parts: 4,
      decode: "none",
      onDecodeError: "fail"
    })
    const nightly = Schema.decodeUnknownSync(NightlyJob)({
      job: "nightly-export",
      out: "/tmp/x",
      layers: [{ catalog: "hrn:here:data:::c", layer: "l" }]
    })
    const backfill = Schema.decodeUnknownSync(BackfillJob)({
      job: "backfill",
      out: "/tmp/x",
      catalog: "hrn:here:data:::c",
      layer: "l",
      from: 1,
      to: 2
    })
    for (const job of [nightly, backfill]) expect(job).toMatchObject(Either.getOrThrow(fromFlags))
  })

  it("parse each flag as its setting's schema says", async () => {
    expect(
      await settingsOf([
        "--out",
        "s3://bucket/prefix",
        "--format",
        "both",
        "--compression",
        "snappy",
        "--concurrency",
        "8",
        "--max-concurrency",
        "128",
        "--buffer-bytes",
        "33554432",
        "--list-concurrency",
        "2",
        "--parts",
        "6",
        "--max-file-bytes",
        "1000000",
        "--decode",
        "protobuf",
        "--schema-bundle",
        "b.zip",
        "--explode",
        "links",
        "--on-decode-error",
        "skip"
      ])
    ).toEqual(Either.right({
      out: "s3://bucket/prefix",
      format: "both",
      compression: "snappy",
      concurrency: 8,
      maxConcurrency: 128,
      bufferBytes: 33_554_432,
      listConcurrency: 2,
      parts: 6,
      maxFileBytes: 1_000_000,
      decode: "protobuf",
      schemaBundle: "b.zip",
      explode: "links",
      onDecodeError: "skip"
    }))
  })

  it("refuse what the schema refuses, naming the flag", async () => {
    expect(await settingsOf(["--out", "x", "--format", "csv"])).toEqual(
      Either.left("--format must be one of parquet, arrow, both, iceberg, got 'csv'.")
    )
    expect(await settingsOf(["--out", "x", "--concurrency", "abc"])).toEqual(
      Either.left("--concurrency must be an integer, got 'abc'.")
    )
    expect(await settingsOf(["--out", "x", "--list-concurrency", "0", "--parts", "-1"])).toEqual(
      Either.left("--list-concurrency must be a positive integer, got 0.")
    )
    expect(await settingsOf(["--out", "x", "--max-file-bytes", "0"])).toEqual(
      Either.left("--max-file-bytes must be a positive integer, got 0.")
    )
    expect(await settingsOf(["--out", "x", "--explode", "links"])).toEqual(
      Either.left("--explode decodes protobuf: add --decode auto or --decode protobuf.")
    )
  })
})
