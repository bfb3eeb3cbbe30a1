// Preloaded (`NODE_OPTIONS=--import <this file>`) into a CLI a test runs: on SIGUSR2 its wall clock
// (Date.now, which Effect's Clock reads) jumps CLOCK_JUMP_SECONDS ahead, so that a test can make a
// request look slow without waiting that long for it. Timers are not affected.
const jump = Number(process.env.CLOCK_JUMP_SECONDS) * 1000
if (!Number.isFinite(jump) || jump <= 0) throw new Error("clock-jump.mjs needs CLOCK_JUMP_SECONDS, a positive number")
const realNow = Date.now
let ahead = 0
Date.now = () => realNow() + ahead
process.on("SIGUSR2", () => {
  ahead += jump
})
