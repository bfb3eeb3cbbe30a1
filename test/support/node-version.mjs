// Preloaded (`NODE_OPTIONS=--import=<this file>`) so that a program sees process.versions.node as
// $NODE_VERSION_SEEN: how a test runs the CLI as if on another Node line.
Object.defineProperty(process, "versions", { value: { ...process.versions, node: process.env.NODE_VERSION_SEEN } })
