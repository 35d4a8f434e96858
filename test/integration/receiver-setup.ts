// A real HTTP target on loopback for the workerd tests. Its behaviour is chosen by path:
//   /ok, /fail/<status>[?retryAfter=s], /hang/<ms>, /flaky/<n> (fails n times, then 200)
// GET /__requests?path=<prefix> returns what it received (headers, body, arrival time).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { TestProject } from "vitest/node";

interface Received {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  /** the body's exact bytes */
  bodyBase64: string;
  at: number;
}

export default async function setup(project: TestProject) {
  const received: Received[] = [];
  const flakyCounts = new Map<string, number>();
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname === "/__requests") {
      const prefix = url.searchParams.get("path") ?? "";
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(received.filter((r) => r.path.startsWith(prefix))));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(", ") : (v ?? "");
    received.push({ path: url.pathname + url.search, method: req.method ?? "", headers, body: Buffer.concat(chunks).toString("utf8"), bodyBase64: Buffer.concat(chunks).toString("base64"), at: Date.now() });
    const [, kind, arg] = url.pathname.split("/");
    if (kind === "fail") {
      const retryAfter = url.searchParams.get("retryAfter");
      if (retryAfter) res.setHeader("retry-after", retryAfter);
      res.statusCode = Number(arg);
      res.end(`failing with ${arg}`);
    } else if (kind === "hang") {
      setTimeout(() => res.end("late"), Number(arg));
    } else if (kind === "flaky") {
      const key = url.pathname + url.search;
      const seen = (flakyCounts.get(key) ?? 0) + 1;
      flakyCounts.set(key, seen);
      res.statusCode = seen <= Number(arg) ? 503 : 200;
      res.end(res.statusCode === 200 ? "ok" : "not yet");
    } else {
      res.end("ok");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("receiver did not bind");
  project.provide("receiverUrl", `http://127.0.0.1:${address.port}`);
  return async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}
