import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const UNIT =
  /^(\d+(?:\.\d+)?)\s*(ms|millis|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$/i

const MILLIS: ReadonlyArray<readonly [RegExp, number]> = [
  [/^(ms|milli)/, 1],
  [/^s/, 1000],
  [/^m/, 60_000],
  [/^h/, 3_600_000],
  [/^d/, 86_400_000],
  [/^w/, 604_800_000]
]

/** `500ms`, `90s`, `10m`, `12h`, `30d`, `2w`, `1.5h`, `2 minutes`, `7 days`; none when it is none of these. */
export const parse = (raw: string): Option.Option<Duration.Duration> => {
  const m = UNIT.exec(raw.trim())
  if (m === null) return Option.none()
  const unit = m[2]!.toLowerCase()
  const factor = MILLIS.find(([prefix]) => prefix.test(unit))![1]
  return Option.some(Duration.millis(Number(m[1]) * factor))
}

/** A duration as people write it in flags and job configs (see `parse`); the one parser of both. */
export const DurationString = Schema.transformOrFail(Schema.String, Schema.DurationFromSelf, {
  strict: true,
  decode: (raw, _, ast) =>
    Option.match(parse(raw), {
      onNone: () =>
        ParseResult.fail(
          new ParseResult.Type(ast, raw, `'${raw}' is not a duration (for example 90s, 10m, 12h, 30d or "7 days")`)
        ),
      onSome: ParseResult.succeed
    }),
  encode: (d) => ParseResult.succeed(`${Duration.toMillis(d)}ms`)
})
