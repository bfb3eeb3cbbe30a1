import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { cli, serviceFlags } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { blobStatus, latestVersion, listing, minimumVersion, publish } from "../versions/support.ts"

/**
 * The retention guard's defaults through the real CLI: files a manifest names must be there with their
 * size, locations it cannot read are refused, job configs must choose, and surviving partitions that
 * share a data handle with a deleted version are named before their data goes. Versions 0..3 are
 * seeded; the handle-sharing case publishes more.
 */

const { cleanup, tempDir } = cleanups()
let svc: TestService
let flags: Array<string>

const retention = (...args: Array<string>) => cli(["retention", "--catalog", DEMO, ...args, ...flags])
const exportPlaces = (out: string, version: number, ...extra: Array<string>) =>
  cli([
    "export",
    "--catalog",
    DEMO,
    "--layer",
    "places",
    "--version",
    String(version),
    "--out",
    out,
    "--parts",
    "1",
    ...flags,
    ...extra
  ])
const oneLine = (stderr: string) => stderr.trim().split("\n").filter((l) => l.startsWith("catalog-export: "))

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 20, versions: 4 } })
  cleanup.push(() => svc.close())
  flags = await serviceFlags(svc)
})

describe("the retention guard", () => {
  it("counts an export only when the files its manifest names are there with their recorded size", async () => {
    const out = tempDir("jobs-retention-")
    for (const v of [0, 1]) expect((await exportPlaces(out, v)).code).toBe(0)
    const dir = path.join(out, "demo", "places", "version=0")
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, "_manifest.json"), "utf8")) as {
      files: Array<{ path: string; bytes: number }>
    }
    const file = manifest.files[0]!
    const keep = (...args: Array<string>) =>
      retention("--minimum", "2", "--require-exported", out, "--layer", "places", "--dry-run", ...args)
    expect((await keep()).code).toBe(0)

    fs.truncateSync(path.join(dir, file.path), file.bytes - 10)
    const truncated = await keep()
    expect(truncated.code).toBe(2)
    expect(oneLine(truncated.stderr)).toEqual([
      `catalog-export: Refusing to raise the minimum version of ${DEMO} to 2: version 0 of layer 'places' has no intact export in ${out}: ` +
      `in the export of version 0, the manifest says ${file.path} has ${file.bytes} bytes, but it has ${
        file.bytes - 10
      }. ` +
      `Export it again (catalog-export export --catalog ${DEMO} --layer places --version 0 --out ${out} --force), or set a lower minimum.`
    ])
    // A refused dry run still prints its plan.
    expect(truncated.stdout).toContain("Raising the minimum version to 2 deletes versions 0..1")

    fs.rmSync(path.join(dir, file.path))
    expect(oneLine((await keep()).stderr)[0]).toContain(
      `in the export of version 0, the manifest names ${file.path}, which is missing.`
    )

    expect((await exportPlaces(out, 0, "--force")).code).toBe(0)
    expect((await keep()).code).toBe(0)
    expect(await minimumVersion(svc)).toBe(0)
  })

  it("refuses locations it cannot read, and a job config that chooses neither the guard nor to skip it", async () => {
    const dir = tempDir("jobs-retention-")
    const hdfs = await retention("--keep-last", "2", "--require-exported", "hdfs://exports/catalogs", "--dry-run")
    expect(hdfs.code).toBe(2)
    const [refusal, ...rest] = oneLine(hdfs.stderr)
    expect(rest).toEqual([])
    expect(refusal).toMatch(
      /^catalog-export: Location hdfs:\/\/exports\/catalogs uses hdfs:\/\/, which this version cannot use; give a local directory or .*s3:\/\/.*gs:\/\/.*az:\/\//
    )
    const file = path.join(dir, "plain-file")
    fs.writeFileSync(file, "x")
    const notDir = await retention("--keep-last", "2", "--require-exported", file, "--dry-run")
    expect(notDir.code).toBe(2)
    expect(oneLine(notDir.stderr)[0]).toContain(`Export location ${file} is not a directory`)

    const job = (fields: Record<string, unknown>) => {
      const path_ = path.join(dir, `retention-${Object.keys(fields).join("-") || "none"}.json`)
      fs.writeFileSync(path_, JSON.stringify({ job: "retention", catalog: DEMO, keepLast: 2, dryRun: true, ...fields }))
      return path_
    }
    const neither = await cli(["run", job({}), ...flags])
    expect(neither.code).toBe(2)
    expect(oneLine(neither.stderr)).toEqual([
      `catalog-export: Refusing to delete versions of ${DEMO} without the export guard: give "requireExported" in ${
        path.join(dir, "retention-none.json")
      } ` +
      `(where the exports of this catalog are), or "skipExportCheck": true to delete versions whether or not they were exported.`
    ])
    expect(neither.stdout).toContain("Raising the minimum version to 2 deletes versions 0..1")
    const skipped = await cli(["run", job({ skipExportCheck: true }), ...flags, "--json"])
    expect(skipped.code, skipped.stderr).toBe(0)
    expect(JSON.parse(skipped.stdout)).toMatchObject({
      catalog: DEMO,
      minimum: 0,
      target: 2,
      refused: null,
      dryRun: true,
      applied: false
    })
    expect(await minimumVersion(svc)).toBe(0)
  })

  it("names the surviving partitions whose data handle a deleted version published, whose data goes with it (data-handle rule 3)", async () => {
    // Version 4 publishes 'owner' with a new handle; version 5 reuses that handle for 'reuser' and
    // gives 'owner' new data, so the handle's first publisher lives only in version 4.
    const v4 = await publish(svc, [{
      partition: "owner",
      data: JSON.stringify({ first: true }),
      dataHandle: "shared-handle-1"
    }])
    expect(v4).toBe(4)
    expect(
      await publish(svc, [{ partition: "reuser", dataHandle: "shared-handle-1" }, {
        partition: "owner",
        data: JSON.stringify({ second: true })
      }])
    ).toBe(5)
    expect((await listing(svc, "places", 5)).find((p) => p.partition === "reuser")?.dataHandle).toBe("shared-handle-1")

    const dry = await retention("--minimum", "5", "--skip-export-check", "--dry-run", "--layer", "places")
    expect(dry.code, dry.stderr).toBe(0)
    const warnings = dry.stderr.split("\n").filter((l) => l.startsWith("warning: "))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain(
      "1 partition of the versions that stay reference data handles first published in versions this deletes"
    )
    expect(warnings[0]).toContain(
      "'reuser' of layer 'places' (version 5, data handle shared-handle-1, published by version 4)"
    )
    // Nothing shares a handle with what a minimum of 4 deletes.
    const none = await retention("--minimum", "4", "--skip-export-check", "--dry-run")
    expect(none.code, none.stderr).toBe(0)
    expect(none.stderr).not.toContain("warning: ")

    // It was right: once version 4 is deleted, the surviving partition's data is gone.
    expect(await blobStatus(svc, "places", "shared-handle-1")).toBe(200)
    const real = await retention("--minimum", "5", "--skip-export-check", "--layer", "places")
    expect(real.code, real.stderr).toBe(0)
    expect(real.stderr).toContain("'reuser' of layer 'places'")
    expect(await latestVersion(svc)).toBe(5)
    const deadline = Date.now() + 10_000
    while ((await blobStatus(svc, "places", "shared-handle-1")) !== 404 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(await blobStatus(svc, "places", "shared-handle-1")).toBe(404)
    expect((await listing(svc, "places", 5)).find((p) => p.partition === "reuser")?.dataHandle).toBe("shared-handle-1")

    // An export of version 5 meets the missing blob: an integrity problem of the catalog (exit 6), not "not found".
    const out = tempDir("jobs-retention-reuse-")
    const exported = await exportPlaces(out, 5)
    expect(exported.code, exported.stderr).toBe(6)
    const sentence = oneLine(exported.stderr)
    expect(sentence).toHaveLength(1)
    expect(sentence[0]).toContain("partition 'reuser' (data handle shared-handle-1)")
    expect(sentence[0]).toContain("data handle rule 3")
    expect(fs.existsSync(path.join(out, "demo", "places", "version=5", "_manifest.json"))).toBe(false)
  })
})
