import pkg from "../../package.json" with { type: "json" }

/** Name and version of this tool, as written into manifests and file metadata. */
export const TOOL = { name: pkg.name, version: pkg.version } as const
