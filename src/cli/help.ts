import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Span from "@effect/cli/HelpDoc/Span"
import * as Arr from "effect/Array"
import * as Order from "effect/Order"
import { ExitCode } from "../domain/ExitCode.ts"
import { TOOL } from "../domain/Tool.ts"
import { EXIT_MEANINGS } from "./Exit.ts"

/**
 * `catalog-export <command> --help`, for people: @effect/cli's help of the command (its description
 * and the flags' own descriptions), rendered here in one place with what it does not say: required
 * flags first and marked so, defaults, examples and exit codes, and without its type notes ("A
 * user-defined piece of text.", "This setting is optional.") or the built-in flags every command
 * takes (listed once, by `catalog-export --help`).
 */

/**
 * The catalog version flag of export, plan and `partitions list/get`: `--version` to the user, this
 * inside, because @effect/cli takes a `--version` anywhere as its own (print the app's version and
 * exit 0), which made `export --version 2` a silent success. main.ts renames the word before parsing.
 */
export const CATALOG_VERSION_FLAG = "catalog-version"

/** The commands with a catalog version flag. */
const WITH_CATALOG_VERSION = ["export", "plan", "partitions"]

/**
 * The arguments as the parser is given them: after export, plan or partitions, `--version` is the
 * command's catalog version (`catalog-export --version` alone stays the app's version).
 */
export const forParser = (args: ReadonlyArray<string>): Array<string> =>
  args.map((arg, i) =>
    i > 0 && WITH_CATALOG_VERSION.includes(args[0] ?? "") && (arg === "--version" || arg.startsWith("--version="))
      ? arg.replace("--version", `--${CATALOG_VERSION_FLAG}`)
      : arg
  )

/** The sentence for a catalog `--version` given no value (which @effect/cli would take for the app's `--version`). */
export const versionWithoutValue = (args: ReadonlyArray<string>): string | undefined => {
  const at = args.indexOf(`--${CATALOG_VERSION_FLAG}`)
  const value = args[at + 1]
  // A value may be negative (`--version -1` is refused by the flag's own check, naming the value).
  return at === -1 || (value !== undefined && !value.startsWith("--"))
    ? undefined
    : `--version of '${TOOL.name} ${
      args[0]
    }' takes the catalog version (a number, or latest); '${TOOL.name} --version' alone prints the version of ${TOOL.name}.`
}

/** Examples per top-level command, as a user types them; a subcommand's help shows the ones that run it. */
const EXAMPLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  serve: [
    "catalog-export serve --port 0 --seed demo",
    "catalog-export serve --data ./catalog-data --port 31005"
  ],
  export: [
    "catalog-export export --catalog hrn:here:data::olp-here:rib-2 --layer topology-geometry --out ./exports",
    "catalog-export export --catalog HRN --layer ID --out s3://bucket/exports --mode changes --json",
    "catalog-export export --catalog HRN --layer ID --out ./exports --version 42 --dry-run --json"
  ],
  plan: [
    "catalog-export plan --catalog HRN --layer ID --shards 8 --out s3://bucket/exports",
    "catalog-export plan --catalog HRN --layer ID --mode changes --shards 4 --out ./exports"
  ],
  commit: ["catalog-export commit --plan s3://bucket/exports/_plans/PLAN/_plan.json"],
  backfill: [
    "catalog-export backfill --catalog HRN --layer ID --from 10 --to 20 --out ./exports",
    "catalog-export backfill --catalog HRN --layer ID --from 0 --out ./exports --version-concurrency 2 --json"
  ],
  retention: [
    "catalog-export retention --catalog HRN --keep-last 30 --require-exported ./exports --dry-run",
    "catalog-export retention --catalog HRN --older-than 90d --require-exported s3://bucket/exports --yes",
    "catalog-export retention --catalog HRN auto --keep 50"
  ],
  compact: ["catalog-export compact --catalog HRN --layer ID --out ./exports"],
  run: [
    "catalog-export run config/nightly.json",
    "catalog-export run config/retention.json --dry-run",
    "catalog-export run config/backfill.json --json"
  ],
  check: [
    "catalog-export check config/nightly.json",
    "catalog-export check --catalog HRN --layer ID --out ./exports"
  ],
  demo: ["catalog-export demo", "catalog-export demo --out ./demo-exports"],
  catalogs: [
    "catalog-export catalogs list",
    "catalog-export catalogs get --catalog HRN",
    "catalog-export catalogs create --file catalog.json",
    "catalog-export catalogs update --catalog HRN --file catalog.json",
    "catalog-export catalogs delete --catalog HRN"
  ],
  layers: [
    "catalog-export layers list --catalog HRN",
    "catalog-export layers delete --catalog HRN --layer ID"
  ],
  partitions: [
    "catalog-export partitions list --catalog HRN --layer ID --version 3",
    "catalog-export partitions get --catalog HRN --layer ID --partition 23618402"
  ],
  versions: [
    "catalog-export versions latest --catalog HRN",
    "catalog-export versions minimum --catalog HRN",
    "catalog-export versions list --catalog HRN"
  ],
  blob: ["catalog-export blob get --catalog HRN --layer ID --data-handle HANDLE --output blob.bin"],
  lookup: ["catalog-export lookup --catalog HRN"],
  subscriptions: [
    "catalog-export subscriptions create --file subscription.json",
    "catalog-export subscriptions list --json",
    "catalog-export subscriptions get --subscription ID",
    "catalog-export subscriptions delete --subscription ID"
  ],
  stream: ["catalog-export stream read --catalog HRN --layer ID"],
  publish: [
    "catalog-export publish --catalog HRN --layer ID --from-dir ./partitions",
    "catalog-export publish --catalog HRN --layer ID --partition 23618402=tile.bin --json"
  ],
  schemas: [
    "catalog-export schemas list",
    "catalog-export schemas get --schema HRN",
    "catalog-export schemas publish --file schema.zip"
  ],
  regions: [
    "catalog-export regions down --region eu-ireland --lookup-url http://127.0.0.1:31005/lookup/v1",
    "catalog-export regions up --region eu-ireland --lookup-url http://127.0.0.1:31005/lookup/v1",
    "catalog-export regions status --lookup-url http://127.0.0.1:31005/lookup/v1"
  ]
}

/** The examples of a command path (`["catalogs", "list"]`): those that run it, else its group's. */
export const examplesOf = (path: ReadonlyArray<string>): ReadonlyArray<string> => {
  const all = EXAMPLES[path[0] ?? ""] ?? []
  const prefix = [TOOL.name, ...path].join(" ")
  const own = all.filter((e) => e === prefix || e.startsWith(`${prefix} `))
  return own.length > 0 ? own : all
}

const exitCodesSection = HelpDoc.blocks([
  HelpDoc.h1("EXIT CODES"),
  ...Arr.sort(Object.values(ExitCode), Order.number).map((code) => HelpDoc.p(`${code}  ${EXIT_MEANINGS[code]}`))
])

/** The words @effect/cli adds to every flag's description, and what the help says instead (nothing, or a sentence). */
const NOISE: ReadonlyArray<readonly [RegExp, (m: RegExpMatchArray) => string | undefined]> = [
  [
    /^(A user-defined piece of text|A true or false value|An integer|A floating point number|A date|A file|A directory|One of the following: .*)\.?$/,
    () => undefined
  ],
  [/^This setting is optional\.$/, () => undefined],
  [/^This setting is optional\. Defaults to: (.*)$/, (m) => `Default: ${m[1]}.`],
  [/^This option can be set from environment variables\.$/, () => undefined],
  [/^This option may be repeated zero or more times\.$/, () => "May be given more than once."]
]

const OPTIONAL = [/^This setting is optional/, /^This option may be repeated zero or more times/]

/** Flags @effect/cli gives every command; `catalog-export --help` lists them, a command's help does not. */
const BUILT_INS = ["--completions", "--log-level", "--help", "--wizard", "--version"]

const ANSI = /\x1b\[[0-9;]*m/g

/** The plain text of a doc (toAnsiText styles headers and code). */
const textOfDoc = (doc: HelpDoc.HelpDoc) => HelpDoc.toAnsiText(doc).replace(ANSI, "").trim()

const textOf = (span: Span.Span): string => textOfDoc(HelpDoc.p(span))

const paragraphsOf = (doc: HelpDoc.HelpDoc): Array<HelpDoc.HelpDoc> =>
  HelpDoc.isSequence(doc) ? [...paragraphsOf(doc.left), ...paragraphsOf(doc.right)] : HelpDoc.isEmpty(doc) ? [] : [doc]

interface Flag {
  readonly name: string
  readonly span: Span.Span
  readonly required: boolean
  readonly text: ReadonlyArray<string>
}

/** A flag of the OPTIONS list: its name and description without @effect/cli's type notes; required unless it says optional. */
const flagOf = ([span, block]: readonly [Span.Span, HelpDoc.HelpDoc]): Flag => {
  const paragraphs = paragraphsOf(block).map(textOfDoc)
  const name = textOf(span).match(/--[a-z][a-z-]*/)?.[0] ?? ""
  // A flag whose description starts with "Required" is required by the command, not by the parser (export's --catalog, which --plan replaces).
  const required = !paragraphs.some((p) => OPTIONAL.some((r) => r.test(p))) ||
    paragraphs.some((p) => p.startsWith("Required"))
  const text = paragraphs.flatMap((p) => {
    for (const [pattern, replace] of NOISE) {
      const m = p.match(pattern)
      if (m !== null) return replace(m) ?? []
    }
    return [p]
  })
  return {
    name,
    span,
    required,
    text: required && !text.some((t) => t.startsWith("Required")) ? ["Required.", ...text] : text
  }
}

const descriptionOf = (flag: Flag) => HelpDoc.blocks(flag.text.map((t) => HelpDoc.p(t)))

const flagsSection = (flags: ReadonlyArray<Flag>) =>
  Arr.isNonEmptyReadonlyArray(flags)
    ? HelpDoc.blocks([
      HelpDoc.h1("OPTIONS"),
      HelpDoc.descriptionList(Arr.map(flags, (f): [Span.Span, HelpDoc.HelpDoc] => [f.span, descriptionOf(f)]))
    ])
    : HelpDoc.empty

/** A subcommand's line under COMMANDS: its name and what it does (@effect/cli puts every flag between). */
const subcommandLine = (line: HelpDoc.HelpDoc): HelpDoc.HelpDoc => {
  const text = textOfDoc(line)
  const [usage = "", ...rest] = text.split(/ {2,}/)
  const words = usage.split(" ")
  const flagAt = words.findIndex((w) => w.startsWith("-") || w.startsWith("[") || w.startsWith("<"))
  const name = words.slice(0, flagAt === -1 ? words.length : flagAt).join(" ")
  return HelpDoc.p(`${name.padEnd(10)}  ${rest.join(" ")}`)
}

/**
 * The help of the command at `path` (empty: the top level), from what @effect/cli made of it
 * (`doc`: DESCRIPTION, ARGUMENTS, OPTIONS, COMMANDS sections).
 */
export const helpText = (path: ReadonlyArray<string>, doc: HelpDoc.HelpDoc): string => {
  const blocks = paragraphsOf(doc)
  const sections: Array<HelpDoc.HelpDoc> = []
  const purpose: Array<HelpDoc.HelpDoc> = []
  const flags: Array<Flag> = []
  const args: Array<string> = []
  let subcommands = false
  let header = ""
  for (const block of blocks) {
    if (HelpDoc.isHeader(block)) {
      header = textOfDoc(block)
      if (header === "COMMANDS") subcommands = true
      if (header !== "OPTIONS" && header !== "DESCRIPTION") sections.push(block)
      continue
    }
    if (header === "OPTIONS" && HelpDoc.isDescriptionList(block)) {
      // One list per flag (Options.all sequences them).
      flags.push(...block.definitions.map(flagOf).filter((f) => path.length === 0 || !BUILT_INS.includes(f.name)))
      continue
    }
    if (header === "ARGUMENTS" && HelpDoc.isDescriptionList(block)) {
      const described = block.definitions.map(flagOf)
      args.push(...described.map((a) => textOf(a.span)))
      sections.push(
        HelpDoc.descriptionList(
          Arr.map(described as Arr.NonEmptyArray<Flag>, (a): [Span.Span, HelpDoc.HelpDoc] => [a.span, descriptionOf(a)])
        )
      )
      continue
    }
    if (header === "DESCRIPTION") {
      purpose.push(block)
      continue
    }
    if (header === "COMMANDS" && HelpDoc.isEnumeration(block)) {
      sections.push(HelpDoc.blocks(block.elements.map(subcommandLine)))
      continue
    }
    sections.push(block)
  }
  const ordered = [...flags.filter((f) => f.required), ...flags.filter((f) => !f.required)]
  const usage = [
    TOOL.name,
    ...path,
    ...(subcommands ? ["<command>"] : []),
    ...ordered.filter((f) => f.required).map((f) => textOf(f.span).replace(/\.\.\.$/, "")),
    ...args,
    ...(ordered.some((f) => !f.required) ? ["[options]"] : [])
  ].join(" ")
  const examples = examplesOf(path)
  const text = HelpDoc.toAnsiText(HelpDoc.blocks([
    ...purpose,
    path.length === 0 ? HelpDoc.p(`${TOOL.name} ${TOOL.version}`) : HelpDoc.empty,
    HelpDoc.h1("USAGE"),
    HelpDoc.p(`$ ${usage}`),
    ...sections,
    flagsSection(ordered),
    ...(Arr.isNonEmptyReadonlyArray(examples)
      ? [HelpDoc.h1("EXAMPLES"), HelpDoc.blocks(examples.map((e) => HelpDoc.p(`$ ${e}`)))]
      : []),
    path.length === 0 ? HelpDoc.empty : exitCodesSection
  ]))
  return text.replaceAll(`--${CATALOG_VERSION_FLAG}`, "--version")
}
