import * as Duration from "effect/Duration"
import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"

/** How far to raise a catalog's minimum version. */
export type Policy =
  | { readonly _tag: "KeepLast"; readonly count: number }
  | { readonly _tag: "OlderThan"; readonly age: Duration.Duration }
  | { readonly _tag: "Minimum"; readonly version: number }

export const describePolicy = (policy: Policy): string =>
  policy._tag === "KeepLast"
    ? `keep the last ${plural(policy.count, "version")}`
    : policy._tag === "OlderThan"
    ? `delete versions older than ${Duration.format(policy.age)}`
    : `minimum version ${policy.version}`

/** The retention refused to go further because data there was not exported. */
export class RetentionRefused
  extends Schema.TaggedError<RetentionRefused>()("RetentionRefused", { message: Schema.String })
{
  get exitCode() {
    return ExitCode.usage
  }
}

export interface VersionStamp {
  readonly version: number
  readonly timestamp: number
}

/**
 * The minimum version a policy asks for: never below the current minimum, never past the latest
 * version (the last version of a catalog cannot be deleted).
 */
export const targetMinimum = (
  policy: Policy,
  bounds: { readonly latest: number; readonly minimum: number },
  versions: ReadonlyArray<VersionStamp>,
  now: number
): number => {
  let target: number
  switch (policy._tag) {
    case "KeepLast":
      target = bounds.latest - policy.count + 1
      break
    case "Minimum":
      target = policy.version
      break
    case "OlderThan": {
      const cutoff = now - Duration.toMillis(policy.age)
      target = versions.find((v) => v.timestamp >= cutoff)?.version ?? bounds.latest
      break
    }
  }
  return Math.max(bounds.minimum, Math.min(target, bounds.latest))
}
