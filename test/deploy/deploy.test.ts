/**
 * The deployment examples (deploy/, Dockerfile): the Kubernetes manifests checked against the
 * Kubernetes object schema, the AWS Batch job definitions against what Batch needs, and the exact
 * commands they hold run as local processes against the local service, with the engines' index
 * variables set: four workers at once on 8,000 partitions, one killed with SIGKILL and started
 * again, then commit; the output is row for row what a single-process export writes, to a local
 * directory and to an object store.
 */
import { Job } from "kubernetes-models/batch/v1/Job"
import { ConfigMap } from "kubernetes-models/v1/ConfigMap"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { cli, type CliResult, ROOT } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { cleanups, readJson } from "../support/files.ts"
import { startStore, type TestStore } from "../support/s3.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const PARTITIONS = 8_000
const K8S = path.join(ROOT, "deploy", "kubernetes")
const BATCH = path.join(ROOT, "deploy", "aws-batch")

const { tempDir } = cleanups()
let svc: TestService
let store: TestStore
let credentials: string

beforeAll(async () => {
  ;[svc, store] = await Promise.all([
    startService({ seed: { partitions: PARTITIONS, versions: 1, blobBytes: 64 } }),
    startStore()
  ])
  credentials = await svc.credentialsFile()
}, 120_000)
afterAll(async () => {
  await store?.close()
  await svc?.close()
})

const yamlOf = (file: string) =>
  parseAllDocuments(fs.readFileSync(path.join(K8S, file), "utf8")).map((d) => d.toJS() as Record<string, any>)
const configMap = () => new ConfigMap(yamlOf("config.yaml")[0] as any)
const job = (file: string) => new Job(yamlOf(file)[0] as any)
const container = (j: Job) => j.spec!.template.spec!.containers[0]!

interface Command {
  readonly args: ReadonlyArray<string>
  readonly env: Record<string, string>
}

/** The container's command as the kubelet would start it: its environment, `$(VAR)` in args expanded. */
const podCommand = (j: Job, config: Record<string, string>, set: Record<string, string> = {}): Command => {
  const c = container(j)
  const env: Record<string, string> = {}
  for (const from of c.envFrom ?? []) if (from.configMapRef?.name === "catalog-export") Object.assign(env, config)
  for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value
  Object.assign(env, set)
  const args = (c.args ?? []).map((a) => a.replace(/\$\(([A-Z_]+)\)/g, (_, name: string) => env[name] ?? `$(${name})`))
  return { args, env }
}

/** The local stand-ins for what the cluster provides: the service's lookup and credentials, the bucket's endpoint. */
const local = () => ({ ...store.env, CATALOG_LOOKUP_URL: svc.lookupUrl, HERE_CREDENTIALS_FILE: credentials })

const run = (command: Command, options: { env?: Record<string, string>; onSpawn?: (c: ChildProcess) => void } = {}) =>
  cli(command.args, {
    env: { ...command.env, ...local(), ...options.env },
    timeoutMs: 300_000,
    ...(options.onSpawn === undefined ? {} : { onSpawn: options.onSpawn })
  })

const ok = (r: CliResult) => expect(r.code, `${r.stdout}${r.stderr}`).toBe(0)

describe("the Kubernetes manifests", () => {
  it("are valid Kubernetes objects: a ConfigMap, the plan and commit Jobs, and an Indexed Job of one pod per shard", () => {
    const config = configMap()
    config.validate()
    for (const file of ["plan.yaml", "shards.yaml", "commit.yaml"]) {
      const j = job(file)
      j.validate()
      expect(j.spec!.template.spec!.restartPolicy).toBe("Never")
      expect(j.spec!.template.spec!.securityContext?.runAsNonRoot).toBe(true)
      expect(container(j).envFrom?.some((f) => f.configMapRef?.name === "catalog-export")).toBe(true)
    }
    const shards = job("shards.yaml").spec!
    expect(shards.completionMode).toBe("Indexed")
    expect(shards.completions).toBe(Number(config.data!.SHARDS))
    expect(shards.parallelism).toBe(shards.completions)
    expect(shards.backoffLimitPerIndex).toBeGreaterThan(0)
    const rules = shards.podFailurePolicy!.rules
    const failIndex = rules.find((r) => r.action === "FailIndex")!.onExitCodes!
    // Bad input, auth, not found and integrity fail the shard at once; transient failures (5) and kills are retried.
    expect(failIndex.operator).toBe("In")
    expect([...failIndex.values].sort()).toEqual([2, 3, 4, 6])
    expect(rules.some((r) => r.action === "Ignore" && r.onPodConditions?.some((c) => c.type === "DisruptionTarget")))
      .toBe(true)
    const commitCodes =
      job("commit.yaml").spec!.podFailurePolicy!.rules.find((r) => r.action === "FailJob")!.onExitCodes!.values
    expect([...commitCodes].sort()).toEqual([2, 3, 4, 6, 7])
  })

  it("a broken manifest is caught by the same check", () => {
    const broken = yamlOf("shards.yaml")[0]!
    broken.spec.completionMode = "Indexd"
    expect(() => new Job(broken as any).validate()).toThrow(/completionMode/)
  })

  it("run.sh runs plan, shards and commit in order and passes the plan's location on", () => {
    const script = fs.readFileSync(path.join(K8S, "run.sh"), "utf8")
    const order = ["plan.yaml", "shards.yaml", "commit.yaml"].map((f) => script.indexOf(f))
    expect(order.every((i) => i > 0)).toBe(true)
    expect([...order].sort((a, b) => a - b)).toEqual(order)
    expect(script).toMatch(/set env --local -f "\$here\/shards\.yaml" PLAN="\$plan"/)
  })
})

describe("the Dockerfile", () => {
  it("runs catalog-export as a non-root user", () => {
    const dockerfile = fs.readFileSync(path.join(ROOT, "Dockerfile"), "utf8")
    expect(dockerfile).toMatch(/^USER node$/m)
    expect(dockerfile).toMatch(/^ENTRYPOINT \["catalog-export"\]$/m)
  })
})

/** Rows of an export directory (DuckDB, per-row sha1 of the data), sorted by partition. */
const rowsOf = (dir: string) => readParquet(dir)

const referenceRows = async () => {
  const out = tempDir("deploy-reference-")
  ok(
    await cli([
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "0",
      "--out",
      out,
      "--quiet",
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      credentials
    ], { timeoutMs: 300_000 })
  )
  const rows = await rowsOf(path.join(out, "demo", "places", "version=0"))
  expect(rows).toHaveLength(PARTITIONS)
  return rows
}

let reference: Awaited<ReturnType<typeof rowsOf>> | undefined

describe.each([
  { where: "a local directory", out: () => tempDir("deploy-k8s-"), local: true },
  { where: "an S3 bucket", out: () => `s3://${store.bucket}/k8s`, local: false }
])("the Kubernetes chain's commands, 4 workers to $where", ({ out: outOf, local: isLocal }) => {
  it(
    "plan, four shards at once (one killed with SIGKILL and started again), a refused early commit, commit: the same rows as one process",
    async () => {
      reference ??= await referenceRows()
      const out = outOf()
      const config: Record<string, string> = {
        ...configMap().data!,
        CATALOG: DEMO,
        LAYER: "places",
        VERSION: "0",
        OUT: out
      }
      const shards = Number(config.SHARDS)
      expect(shards).toBe(4)

      const planned = await run(podCommand(job("plan.yaml"), config))
      ok(planned)
      const line = JSON.parse(planned.stdout.trim().split("\n").at(-1)!)
      expect(line).toMatchObject({ shards, version: 0 })
      expect(line.plan).toBe(`${out}/demo/places/version=0/_plan.json`)

      const shard = (index: number, env: Record<string, string> = {}) =>
        run(podCommand(job("shards.yaml"), config, { PLAN: line.plan }), {
          env: { JOB_COMPLETION_INDEX: String(index), ...env }
        })
      // All four at once; shard 2 kills itself (SIGKILL) a third of the way through.
      const first = await Promise.all(
        [0, 1, 2, 3].map((i) => shard(i, i === 2 ? { CATALOG_EXPORT_CRASH_AT: "fetched:700" } : {}))
      )
      expect(first.map((r) => r.signal)).toEqual([null, null, "SIGKILL", null])
      for (const i of [0, 1, 3]) ok(first[i]!)

      const commit = () => run(podCommand(job("commit.yaml"), config, { PLAN: line.plan }))
      const early = await commit()
      expect(early.code).toBe(7)
      expect(early.stderr).toMatch(/shard 2 has not finished\. Nothing was committed\./)
      const manifestKey = "demo/places/version=0/_manifest.json"
      if (isLocal) expect(fs.existsSync(path.join(out, manifestKey))).toBe(false)
      else expect(await store.keys(`k8s/${manifestKey}`)).toEqual([])

      ok(await shard(2))
      ok(await commit())
      // Committing again changes nothing.
      const again = await commit()
      ok(again)
      expect(again.stdout).toMatch(/^Already committed/)

      const local = isLocal ? out : await store.download("k8s")
      const dir = path.join(local, "demo", "places", "version=0")
      expect(await rowsOf(dir)).toEqual(reference)
      const manifest = readJson(path.join(dir, "_manifest.json"))
      expect(manifest).toMatchObject({
        catalogHrn: DEMO,
        layerId: "places",
        version: 0,
        partitions: PARTITIONS,
        mode: "full"
      })
      expect(fs.readdirSync(dir).sort()).toEqual(
        [...manifest.files.map((f: { path: string }) => f.path), "_manifest.json"].sort()
      )
      expect(readJson(path.join(local, "demo", "places", "_state.json")).lastVersion).toBe(0)
      if (!isLocal) expect(store.openUploads()).toEqual([])
    },
    600_000
  )
})

describe("the AWS Batch job definitions", () => {
  const definitions = () =>
    JSON.parse(fs.readFileSync(path.join(BATCH, "job-definitions.json"), "utf8")) as Array<Record<string, any>>
  const byName = (name: string) => definitions().find((d) => d.jobDefinitionName === name)!

  it("are container jobs whose commands use only declared parameters, exit on bad input and retry the rest", () => {
    expect(definitions().map((d) => d.jobDefinitionName)).toEqual([
      "catalog-export-plan",
      "catalog-export-shard",
      "catalog-export-commit"
    ])
    for (const d of definitions()) {
      expect(d.type).toBe("container")
      expect(d.containerProperties.user).toBe("1000")
      const refs = (d.containerProperties.command as Array<string>).filter((a) => a.startsWith("Ref::")).map((a) =>
        a.slice(5)
      )
      expect(refs.every((r) => r in d.parameters)).toBe(true)
      const onExit = d.retryStrategy.evaluateOnExit as Array<{ onExitCode: string; action: string }>
      expect(onExit.at(-1)).toEqual({ onExitCode: "*", action: "RETRY" })
      const exits = onExit.filter((e) => e.action === "EXIT").map((e) => Number(e.onExitCode))
      expect(exits).toEqual(d.jobDefinitionName === "catalog-export-commit" ? [2, 3, 4, 6, 7] : [2, 3, 4, 6])
    }
    const submit = fs.readFileSync(path.join(BATCH, "submit.sh"), "utf8")
    expect(submit).toMatch(/--array-properties size="\$count"/)
    expect(submit).toMatch(/--depends-on jobId="\$shards_job"/)
  })

  it("run as an array job: the plan, two children with AWS_BATCH_JOB_ARRAY_INDEX, the commit", async () => {
    const out = tempDir("deploy-batch-")
    const command = (name: string, parameters: Record<string, string>) => {
      const d = byName(name)
      const values = { ...d.parameters, ...parameters }
      const env = Object.fromEntries(
        (d.containerProperties.environment as Array<{ name: string; value: string }>).map((e) => [e.name, e.value])
      )
      return {
        args: (d.containerProperties.command as Array<string>).map((
          a
        ) => (a.startsWith("Ref::") ? values[a.slice(5)] : a)),
        env
      }
    }
    const planned = await run(command("catalog-export-plan", { catalog: DEMO, layer: "tiles", shards: "2", out }))
    ok(planned)
    const { plan } = JSON.parse(planned.stdout.trim().split("\n").at(-1)!)
    const children = await Promise.all(
      [0, 1].map((i) =>
        run(command("catalog-export-shard", { plan }), { env: { AWS_BATCH_JOB_ARRAY_INDEX: String(i) } })
      )
    )
    for (const child of children) ok(child)
    expect(children.map((c) => c.stdout)).toEqual([
      expect.stringMatching(/^Exported shard 0 of 2 /),
      expect.stringMatching(/^Exported shard 1 of 2 /)
    ])
    ok(await run(command("catalog-export-commit", { plan })))

    const single = tempDir("deploy-batch-single-")
    ok(
      await cli([
        "export",
        "--catalog",
        DEMO,
        "--layer",
        "tiles",
        "--out",
        single,
        "--quiet",
        "--lookup-url",
        svc.lookupUrl,
        "--credentials",
        credentials
      ])
    )
    const version = fs.readdirSync(path.join(single, "demo", "tiles")).find((n) => n.startsWith("version="))!
    expect(await rowsOf(path.join(out, "demo", "tiles", version))).toEqual(
      await rowsOf(path.join(single, "demo", "tiles", version))
    )
  }, 300_000)
})

describe("two runs of the same shard at once (a pod retried while the first still runs)", () => {
  it("never damage each other: the commit holds every row once, as one process writes it", async () => {
    const out = tempDir("deploy-overlap-")
    const flags = ["--quiet", "--lookup-url", svc.lookupUrl, "--credentials", credentials]
    const planned = await cli([
      "plan",
      "--catalog",
      DEMO,
      "--layer",
      "tiles",
      "--shards",
      "2",
      "--parts",
      "4",
      "--out",
      out,
      ...flags
    ])
    ok(planned)
    const { plan } = JSON.parse(planned.stdout.trim())
    const runs = await Promise.all(
      [0, 0, 0, 1].map((i) => cli(["export", "--plan", plan, "--shard", String(i), ...flags]))
    )
    for (const r of runs) ok(r)
    ok(await cli(["commit", "--plan", plan, ...flags]))
    const single = tempDir("deploy-overlap-single-")
    ok(await cli(["export", "--catalog", DEMO, "--layer", "tiles", "--out", single, ...flags]))
    const version = fs.readdirSync(path.join(single, "demo", "tiles")).find((n) => n.startsWith("version="))!
    const dir = path.join(out, "demo", "tiles", version)
    expect(await rowsOf(dir)).toEqual(await rowsOf(path.join(single, "demo", "tiles", version)))
    // Only the files the manifest names are left: the losing runs' files were removed by the commit.
    const manifest = readJson(path.join(dir, "_manifest.json"))
    expect(fs.readdirSync(dir).sort()).toEqual(
      [...manifest.files.map((f: { path: string }) => f.path), "_manifest.json"].sort()
    )
  })
})

describe("export --plan without a shard", () => {
  it("is a usage error naming the index variables", async () => {
    const out = tempDir("deploy-noshard-")
    const planned = await cli([
      "plan",
      "--catalog",
      DEMO,
      "--layer",
      "tiles",
      "--shards",
      "2",
      "--out",
      out,
      "--quiet",
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      credentials
    ])
    ok(planned)
    const { plan } = JSON.parse(planned.stdout.trim())
    const env = Object.fromEntries(
      ["JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ARRAY_INDEX", "CLOUD_RUN_TASK_INDEX", "BATCH_TASK_INDEX"].map((
        n
      ) => [n, undefined])
    )
    const noShard = await cli([
      "export",
      "--plan",
      plan,
      "--quiet",
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      credentials
    ], { env })
    expect(noShard.code).toBe(2)
    expect(noShard.stderr.trim()).toBe(
      "catalog-export: Which shard? Give --shard I, or run it as an array job that sets one of JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX, CLOUD_RUN_TASK_INDEX, BATCH_TASK_INDEX."
    )
    const outOfRange = await cli([
      "export",
      "--plan",
      plan,
      "--quiet",
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      credentials
    ], { env: { ...env, CLOUD_RUN_TASK_INDEX: "2" } })
    expect(outOfRange.code).toBe(2)
    expect(outOfRange.stderr).toMatch(/Shard 2 \(CLOUD_RUN_TASK_INDEX\) does not exist: .* has 2 shards, 0\.\.1\./)
  })
})
