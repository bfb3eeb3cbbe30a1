import * as AutoCorrect from "@effect/cli/AutoCorrect"
import * as CliConfig from "@effect/cli/CliConfig"
import type * as Command from "@effect/cli/Command"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import type * as Usage from "@effect/cli/Usage"
import * as Option from "effect/Option"

/**
 * Typos, as git and gh answer them: an unknown command, subcommand or flag is named with the
 * nearest ones the command has ("did you mean export?"). Read from the command tree itself, so a
 * new command or flag needs nothing here.
 */

/** What @effect/cli answers itself, on every command. */
const BUILT_IN_FLAGS = [["--help", false], ["--version", false], ["--wizard", false], ["--completions", true], [
  "--log-level",
  true
]] as const

/** A command's flags, and whether each takes a value (the next word, unless given as `--flag=value`). */
const flagsOf = (usage: Usage.Usage): Array<readonly [flag: string, takesValue: boolean]> => {
  switch (usage._tag) {
    case "Named":
      return usage.names.filter((n) => n.startsWith("--")).map((n) => [n, Option.isSome(usage.acceptedValues)] as const)
    case "Optional":
    case "Repeated":
      return flagsOf(usage.usage)
    case "Alternation":
    case "Concat":
      return [...flagsOf(usage.left), ...flagsOf(usage.right)]
    default:
      return []
  }
}

/** The known words nearest to `word`, if within two edits (or a third of its length). */
export const nearest = (word: string, known: ReadonlyArray<string>): Array<string> => {
  const distances = known.map((k) => ({ k, d: AutoCorrect.levensteinDistance(word, k, CliConfig.defaultConfig) }))
  const best = Math.min(...distances.map(({ d }) => d))
  return best > Math.max(2, Math.floor(word.length / 3))
    ? []
    : distances.filter(({ d }) => d === best).map(({ k }) => k)
}

const didYouMean = (candidates: ReadonlyArray<string>) =>
  candidates.length === 0 ? "" : ` Did you mean ${candidates.slice(0, 2).join(" or ")}?`

/**
 * The command tree as @effect/cli builds it (its descriptors' tags): `getSubcommands` answers one
 * level only and drops the grandchildren, so the tree is walked here.
 */
type Node =
  | { readonly _tag: "Standard" | "GetUserInput"; readonly name: string }
  | { readonly _tag: "Map"; readonly command: Node }
  | { readonly _tag: "Subcommands"; readonly parent: Node; readonly children: ReadonlyArray<Node> }

const nameOf = (node: Node): string =>
  node._tag === "Map" ? nameOf(node.command) : node._tag === "Subcommands" ? nameOf(node.parent) : node.name

const childrenOf = (node: Node): ReadonlyArray<Node> =>
  node._tag === "Map" ? childrenOf(node.command) : node._tag === "Subcommands" ? node.children : []

/** The node's own flags (not its subcommands'). */
const ownFlags = (node: Node): Array<readonly [string, boolean]> =>
  node._tag === "Map"
    ? ownFlags(node.command)
    : node._tag === "Subcommands"
    ? ownFlags(node.parent)
    : flagsOf(Descriptor.getUsage(node as unknown as Descriptor.Command<unknown>))

/**
 * Walks `args` (without the program name) down the command tree: the commands it names
 * (`["catalogs", "list"]`) and the sentence for the first unknown command, subcommand or flag, if
 * any. Positional arguments of a command without subcommands (a job config's path) are not judged.
 */
const walk = (root: Command.Command<any, any, any, any>, args: ReadonlyArray<string>) => {
  let node = root.descriptor as unknown as Node
  const words: Array<string> = []
  const path = () => [nameOf(root.descriptor as unknown as Node), ...words].join(" ")
  let positional = true
  let skipValue = false
  for (const arg of args) {
    if (skipValue) {
      skipValue = false
      continue
    }
    if (arg === "--") return { words }
    if (arg.startsWith("--")) {
      const [flag, value] = arg.split("=", 2) as [string, string | undefined]
      const known = new Map([...ownFlags(node), ...BUILT_IN_FLAGS])
      const takesValue = known.get(flag)
      if (takesValue === undefined) {
        return {
          words,
          unknown: `unknown flag '${flag}' for '${path()}'.${
            didYouMean(nearest(flag, Array.from(known.keys())))
          } '${path()} --help' lists its flags.`
        }
      }
      skipValue = takesValue && value === undefined
      continue
    }
    if (arg.startsWith("-") || !positional) continue
    const children = childrenOf(node)
    if (children.length === 0) {
      positional = false
      continue
    }
    const next = children.find((c) => nameOf(c) === arg)
    if (next === undefined) {
      const names = children.map(nameOf).sort()
      return {
        words,
        unknown: `unknown command '${path()} ${arg}'.${
          didYouMean(nearest(arg, names))
        } The commands of '${path()}' are ${names.join(", ")}.`
      }
    }
    node = next
    words.push(arg)
  }
  return { words }
}

/** The sentence for the first unknown command, subcommand or flag in `args` (without the program name), if any. */
export const unknownWord = (
  root: Command.Command<any, any, any, any>,
  args: ReadonlyArray<string>
): string | undefined => walk(root, args).unknown

/** The commands `args` name, from the top (`["catalogs", "list"]`): whose help `--help` asks for. */
export const commandPath = (root: Command.Command<any, any, any, any>, args: ReadonlyArray<string>) =>
  walk(root, args).words
