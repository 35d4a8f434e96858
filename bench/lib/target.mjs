// The loopback webhook target: a keep-alive Node HTTP server on 127.0.0.1 that records, for every
// request, when its headers arrived, its webhook-id, attempt and the job index carried in the body,
// and (for slow targets) when the 200 was fully written. It answers 200 at once, or after
// `delayMs` (the crash scenario's 2 s handler). Recording is a few array pushes: the bench process
// shares the 2 cores with the runtime, so it must stay cheap (no signature check here; the e2e
// tests verify signatures).
import { createServer } from "node:http";

export class Target {
  /** @param {{ delayMs?: number }} [options] */
  constructor(options = {}) {
    this.delayMs = options.delayMs ?? 0;
    /** @type {{ at: number, id: string, attempt: number, i: number, answeredAt: number | null, aborted: boolean }[]} */
    this.arrivals = [];
    /** first arrival per webhook-id */
    this.firstById = new Map();
    this.timers = new Set();
    this.sockets = new Set();
    this.server = null;
    this.url = "";
    this.bodyErrors = 0;
  }

  async listen() {
    const server = createServer({ keepAlive: true, keepAliveInitialDelay: 1000 }, (req, res) => this.handle(req, res));
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 70_000;
    server.requestTimeout = 0;
    server.maxRequestsPerSocket = 0;
    server.on("connection", (socket) => {
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    await new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", resolve);
    });
    this.server = server;
    this.url = `http://127.0.0.1:${server.address().port}`;
    return this;
  }

  handle(req, res) {
    const at = Date.now();
    const id = String(req.headers["webhook-id"] ?? "");
    const record = { at, id, attempt: Number(req.headers["x-scheduler-attempt"] ?? 0), i: -1, answeredAt: null, aborted: false };
    this.arrivals.push(record);
    if (!this.firstById.has(id)) this.firstById.set(id, record);
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => { body += chunk; });
    req.on("error", () => { record.aborted = true; });
    req.on("end", () => {
      try {
        record.i = JSON.parse(body).i;
      } catch {
        this.bodyErrors += 1;
      }
    });
    res.on("finish", () => { record.answeredAt = Date.now(); });
    res.on("close", () => { if (record.answeredAt === null) record.aborted = true; });
    const answer = () => {
      if (res.destroyed) return;
      res.writeHead(200, { "content-type": "text/plain", "content-length": "2" });
      res.end("ok");
    };
    if (this.delayMs <= 0) {
      // answer once the body is read, so the connection can be reused at once
      req.on("end", answer);
    } else {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        answer();
      }, this.delayMs);
      this.timers.add(timer);
      req.resume();
    }
  }

  async close() {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => server.close(() => resolve()));
  }
}
