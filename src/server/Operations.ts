import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { CatalogsRepo } from "./db/CatalogsRepo.ts"
import { type OperationRow, OperationsRepo } from "./db/OperationsRepo.ts"
import { json } from "./Reply.ts"

/**
 * How asynchronous config operations look while they run. The local service does the work at once,
 * but a client must not assume that: catalog creation and deletion answer "pending" on the first
 * status poll (and for CREATE_PENDING_MS), and a layer deletion walks its seven steps, one per
 * LAYER_DELETION_STEP_MS, answering "pending" at least once.
 */
export const LAYER_DELETION_STEPS = [
  "delete_layer:validation",
  "delete_layer:metadata",
  "delete_layer:catalog_publishing",
  "delete_layer:layers",
  "delete_layer:database",
  "delete_layer:backups",
  "delete_layer:cache"
] as const

export const LAYER_DELETION_STEP_MS = 150
export const CREATE_PENDING_MS = 200

/** Consecutive delete and create of the same layer id should be 60 seconds apart. */
export const DELETE_CREATE_GAP_MS = 60_000

export type StepState = "Completed" | "In progress" | "Not started"

export const layerDeletionSteps = (current: number): Array<{ name: string; state: StepState }> =>
  LAYER_DELETION_STEPS.map((name, i) => ({
    name,
    state: i < current ? "Completed" : i === current ? "In progress" : "Not started"
  }))

/** A 202 answer while the operation still runs, or undefined once it is done (the caller answers success). */
export const operationProgress = (operation: OperationRow) =>
  Effect.gen(function*() {
    if (operation.state !== "success") return undefined
    const kind = operation.kind
    if (kind !== "create" && kind !== "delete" && kind !== "layer-delete") return undefined
    const earlierPolls = yield* (yield* OperationsRepo).countPoll(operation.token)
    const elapsed = Date.now() - operation.created
    if (kind === "layer-delete") {
      let step = Math.floor(elapsed / LAYER_DELETION_STEP_MS)
      if (earlierPolls === 0) step = Math.min(step, LAYER_DELETION_STEPS.length - 1)
      if (step >= LAYER_DELETION_STEPS.length) return undefined
      return json(202, { status: "pending", steps: layerDeletionSteps(step) })
    }
    if (earlierPolls === 0 || elapsed < CREATE_PENDING_MS) return json(202, { status: "pending" })
    return undefined
  })

/** An RFC 7234 `Warning` header value (299: miscellaneous persistent warning). */
export const warningHeader = (warnings: ReadonlyArray<string>) =>
  warnings.map((w) => `299 - "${w.replace(/["\\]/g, "'")}"`).join(", ")

export const withWarnings = (warnings: ReadonlyArray<string>) => (response: HttpServerResponse.HttpServerResponse) =>
  warnings.length === 0 ? response : HttpServerResponse.setHeader(response, "warning", warningHeader(warnings))

/** Warnings for layers created within 60 seconds of a deletion of the same id in the same catalog. */
export const recreateWarnings = (catalogHrn: string, layerIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const now = Date.now()
    const warnings: Array<string> = []
    for (const id of layerIds) {
      const deletedAt = yield* catalogs.layerDeletedAt(catalogHrn, id)
      if (deletedAt !== undefined && now - deletedAt < DELETE_CREATE_GAP_MS) {
        warnings.push(
          `layer '${id}' was deleted ${
            Math.round((now - deletedAt) / 1000)
          } s ago; separate deleting and creating a layer with the same id by 60 seconds`
        )
      }
    }
    return warnings
  })

/** A warning when a layer is deleted within 60 seconds of its creation. */
export const deleteWarnings = (layerId: string, created: string) => {
  const age = Date.now() - Date.parse(created)
  return Number.isFinite(age) && age < DELETE_CREATE_GAP_MS
    ? [
      `layer '${layerId}' was created ${
        Math.round(age / 1000)
      } s ago; separate creating and deleting a layer with the same id by 60 seconds`
    ]
    : []
}
