// The floor of publishing large files (test/bench/publish.ts): plain JavaScript, so measured.mjs runs
// it in its own process and counts that process's CPU and peak RSS.
//   node upload-floor.mjs --server DIR          a node:http server writing every request body to a file in DIR
//   node upload-floor.mjs --client URL PART_BYTES PARTS_IN_FLIGHT FILE...
//                                               every file POSTed in parts, so many per file in flight, all files at once
import { once } from "node:events"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { Agent, request } from "undici"

const server = (dir) => {
  let n = 0
  const listening = http.createServer(async (req, res) => {
    const out = fs.createWriteStream(path.join(dir, `${n++}.part`))
    for await (const chunk of req) if (!out.write(chunk)) await once(out, "drain")
    out.end()
    await once(out, "close")
    res.writeHead(200, { etag: `"${n}"` }).end()
  })
  listening.listen(0, "127.0.0.1", () => {
    const { port } = listening.address()
    console.log(JSON.stringify({ event: "listening", url: `http://127.0.0.1:${port}`, pid: process.pid }))
  })
}

const client = async (url, partBytes, inFlight, files) => {
  const agent = new Agent({ connections: files.length * inFlight })
  await Promise.all(files.map(async (file) => {
    const size = fs.statSync(file).size
    const starts = Array.from({ length: Math.ceil(size / partBytes) }, (_, i) => i * partBytes)
    await Promise.all(Array.from({ length: inFlight }, async () => {
      for (let start = starts.shift(); start !== undefined; start = starts.shift()) {
        const length = Math.min(partBytes, size - start)
        const res = await request(`${url}/part`, {
          dispatcher: agent,
          method: "POST",
          headers: { "content-length": String(length) },
          body: fs.createReadStream(file, { start, end: start + length - 1, highWaterMark: 1024 * 1024 })
        })
        await res.body.dump()
        if (res.statusCode !== 200) throw new Error(`the floor's server answered ${res.statusCode}`)
      }
    }))
  }))
  await agent.close()
}

const [mode, ...rest] = process.argv.slice(2)
if (mode === "--server") server(rest[0])
else if (mode === "--client") await client(rest[0], Number(rest[1]), Number(rest[2]), rest.slice(3))
