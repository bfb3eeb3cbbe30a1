import * as Layer from "effect/Layer"
import { AppsRepo } from "./AppsRepo.ts"
import { ArtifactsRepo } from "./ArtifactsRepo.ts"
import { BlobsRepo } from "./BlobsRepo.ts"
import { CatalogsRepo } from "./CatalogsRepo.ts"
import { FeaturesRepo } from "./FeaturesRepo.ts"
import { OperationsRepo } from "./OperationsRepo.ts"
import { PublicationsRepo } from "./PublicationsRepo.ts"
import { StreamsRepo } from "./StreamsRepo.ts"
import { SubscriptionsRepo } from "./SubscriptionsRepo.ts"
import { UploadsRepo } from "./UploadsRepo.ts"
import { VersionsRepo } from "./VersionsRepo.ts"

/** Every repository of the service's database (each needs the migrated SqlClient of Database.ts). */
export const layer = Layer.mergeAll(
  AppsRepo.layer,
  ArtifactsRepo.layer,
  BlobsRepo.layer,
  CatalogsRepo.layer,
  FeaturesRepo.layer,
  OperationsRepo.layer,
  PublicationsRepo.layer,
  StreamsRepo.layer,
  SubscriptionsRepo.layer,
  UploadsRepo.layer,
  VersionsRepo.layer
)
