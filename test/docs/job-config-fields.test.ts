/**
 * docs/exporting.md's table of job config fields names exactly the fields each job's schema accepts
 * (pipelines/*.ts: the connection fields, ExportSettings and the job's own), and the defaults it
 * gives for the export settings are the schema's.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { BackfillJob } from "../../pipelines/backfill.ts"
import { NightlyJob } from "../../pipelines/nightly-export.ts"
import { RetentionJob } from "../../pipelines/retention.ts"
import { defaults } from "../../src/export/Settings.ts"
import { ROOT } from "../support/cli.ts"

const SCHEMAS = { "nightly-export": NightlyJob, backfill: BackfillJob, retention: RetentionJob }
type Job = keyof typeof SCHEMAS

interface Row {
  readonly fields: ReadonlyArray<string>
  readonly jobs: ReadonlyArray<string>
  readonly defaultText: string
}

/** The rows of the table under "### Job config fields": each cell split at `|`. */
const tableRows = (): Array<Row> => {
  const text = fs.readFileSync(path.join(ROOT, "docs", "exporting.md"), "utf8")
  const section = text.split("### Job config fields")[1]
  if (section === undefined) throw new Error("docs/exporting.md has no section 'Job config fields'")
  const lines = section.split("\n").filter((l) => l.startsWith("|")).slice(2) // after the header and its rule
  return lines.map((line) => {
    const cells = line.split(" | ").map((c) => c.replace(/^\|\s*|\s*\|$/g, ""))
    return {
      fields: [...cells[0]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!),
      jobs: cells[1]!.split(",").map((j) => j.trim()),
      defaultText: cells[3]!
    }
  })
}

describe("docs/exporting.md: the table of job config fields", () => {
  const rows = tableRows()

  it.each(Object.keys(SCHEMAS) as Array<Job>)("names every field of a %s job config, and no other", (job) => {
    const documented = rows.filter((r) => r.jobs.includes(job)).flatMap((r) => r.fields).sort()
    expect(documented).toEqual(Object.keys(SCHEMAS[job].fields).sort())
  })

  it("names only jobs that exist", () => {
    expect(rows.length).toBeGreaterThan(30)
    expect(rows.flatMap((r) => r.jobs).filter((j) => !(j in SCHEMAS))).toEqual([])
  })

  it("gives the export settings' defaults", () => {
    const wrong = Object.entries(defaults).flatMap(([field, value]) => {
      if (value === undefined) return []
      const row = rows.find((r) => r.fields.includes(field))
      return row?.defaultText.includes(`\`${String(value)}\``) ? [] : [`${field}: ${String(value)}`]
    })
    expect(wrong).toEqual([])
  })
})
