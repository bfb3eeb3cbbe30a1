import * as Effect from "effect/Effect"

/**
 * The local service (SQLite, the HTTP server, the demo seed), loaded only by the commands that run
 * it (`serve`, `demo`): start-up time goes to what every command needs. The bundle keeps it in
 * chunks of its own.
 */
export const loadServer = Effect.promise(async () => {
  const [Faults, LocalService, Seed, Server] = await Promise.all([
    import("../server/Faults.ts"),
    import("../server/LocalService.ts"),
    import("../server/Seed.ts"),
    import("../server/Server.ts")
  ])
  return {
    Faults,
    LocalService,
    defaultSeed: Seed.defaultSeed,
    noSeed: Seed.noSeed,
    defaultServiceOptions: Server.defaultServiceOptions
  }
})
