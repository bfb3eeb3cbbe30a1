import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { MetadataApi } from "../client/MetadataApi.ts"
import type { AdditionalField } from "../domain/Partition.ts"
import type { Plan } from "./Plan.ts"

/** What the export asks of each listed partition besides id, version and data handle. */
const ADDITIONAL_FIELDS: ReadonlyArray<AdditionalField> = ["dataSize", "checksum"]

/**
 * The partitions of one metadata part of a plan (all of them when the plan has no parts), streamed:
 * the full listing at the pinned version, or the changes since the base version.
 */
export const listPart = (plan: Plan, part: string | undefined) =>
  Stream.unwrap(
    Effect.map(MetadataApi, (metadata) => {
      const common = { additionalFields: ADDITIONAL_FIELDS, ...(part === undefined ? {} : { part }) }
      if (plan.mode === "changes") {
        return metadata.changes(plan.catalogHrn, plan.layerId, {
          ...common,
          startVersion: plan.baseVersion ?? -1,
          endVersion: plan.version
        })
      }
      return metadata.partitions(
        plan.catalogHrn,
        plan.layerId,
        plan.layerType === "versioned" ? { ...common, version: plan.version } : common
      )
    })
  )
