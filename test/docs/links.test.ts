/**
 * The user docs (README.md and docs/*.md) link to each other by file and heading: every relative link
 * must name a file or directory of the repository, and every #anchor a heading of the file it points
 * into, with the anchor GitHub derives from the heading's text.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = path.join(import.meta.dirname, "..", "..")

const docs = (): Array<string> => [
  path.join(ROOT, "README.md"),
  ...fs.readdirSync(path.join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) =>
    path.join(ROOT, "docs", f)
  )
]

/** The lines of a Markdown text outside fenced code blocks, with their 1-based numbers. */
const prose = (text: string): Array<{ readonly line: string; readonly number: number }> => {
  const lines: Array<{ line: string; number: number }> = []
  let fence: string | undefined
  text.split("\n").forEach((line, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1]
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined
    } else if (fence === undefined) {
      lines.push({ line, number: i + 1 })
    }
  })
  return lines
}

/** GitHub's anchor for a heading (github-slugger): its text lower-cased, punctuation dropped, spaces as hyphens. */
const slug = (heading: string): string =>
  heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** The anchors of a Markdown text's headings; a repeated heading gets -1, -2, ... as on GitHub. */
const anchors = (text: string): Set<string> => {
  const seen = new Set<string>()
  for (const { line } of prose(text)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1]
    if (heading === undefined) continue
    const base = slug(heading)
    let anchor = base
    for (let n = 1; seen.has(anchor); n++) anchor = `${base}-${n}`
    seen.add(anchor)
  }
  return seen
}

/** The links of a Markdown file that do not resolve, as `file:line: target (why)`. */
const brokenLinks = (file: string, text: string, readFile: (file: string) => string | undefined) => {
  const broken: Array<string> = []
  let links = 0
  for (const { line, number } of prose(text)) {
    const withoutCode = line.replace(/(`+)[^`]*?\1/g, "")
    for (const match of withoutCode.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1]!
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // http:, https:, mailto:
      links++
      const [pathPart = "", anchor] = target.split("#", 2)
      const where = `${path.relative(ROOT, file)}:${number}: ${target}`
      const resolved = pathPart === "" ? file : path.resolve(path.dirname(file), decodeURIComponent(pathPart))
      if (path.relative(ROOT, resolved).startsWith("..")) {
        broken.push(`${where} (outside the repository)`)
        continue
      }
      const content = resolved === file ? text : readFile(resolved)
      if (content === undefined) {
        broken.push(`${where} (no such file or directory)`)
      } else if (anchor !== undefined && !anchors(content).has(anchor)) {
        broken.push(`${where} (no heading with this anchor in ${path.relative(ROOT, resolved)})`)
      }
    }
  }
  return { broken, links }
}

/** A file's text ("" for a directory), or undefined when there is none. */
const readRepoFile = (file: string): string | undefined => {
  if (!fs.existsSync(file)) return undefined
  return fs.statSync(file).isDirectory() ? "" : fs.readFileSync(file, "utf8")
}

describe("links in README.md and docs/", () => {
  it("every relative link names an existing file, and every #anchor a heading of that file", () => {
    const results = docs().map((file) => brokenLinks(file, fs.readFileSync(file, "utf8"), readRepoFile))
    expect(results.flatMap((r) => r.broken)).toEqual([])
    // The check saw the links: the README's map alone links every guide.
    expect(results.reduce((n, r) => n + r.links, 0)).toBeGreaterThan(40)
  })

  it("finds a missing file, a missing heading and a link out of the repository", () => {
    const file = path.join(ROOT, "docs", "example.md")
    const text = [
      "# Example",
      "## Pre-flight: `catalog-export check`",
      "[ok](#pre-flight-catalog-export-check) [ok](../README.md#set-up) [external](https://example.com/#x)",
      "[gone](missing.md) [wrong](#pre-flight) [out](../../elsewhere.md)",
      "```",
      "[in code](nowhere.md)",
      "```"
    ].join("\n")
    const { broken, links } = brokenLinks(file, text, readRepoFile)
    expect(links).toBe(5)
    expect(broken).toEqual([
      "docs/example.md:4: missing.md (no such file or directory)",
      "docs/example.md:4: #pre-flight (no heading with this anchor in docs/example.md)",
      "docs/example.md:4: ../../elsewhere.md (outside the repository)"
    ])
  })

  it("derives anchors from headings as GitHub does", () => {
    expect(slug("Decoding layer content (columns instead of blobs)")).toBe(
      "decoding-layer-content-columns-instead-of-blobs"
    )
    expect(slug("Interactive map layers (the local service's feature API)")).toBe(
      "interactive-map-layers-the-local-services-feature-api"
    )
    expect(slug("Sharded exports: beyond one machine")).toBe("sharded-exports-beyond-one-machine")
    expect([...anchors("# A\n## A\n```\n# A\n```\n### A")]).toEqual(["a", "a-1", "a-2"])
  })
})
