import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Hono } from "hono";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Delivery, Receiver, type ReceiverOptions, verifyWebhook, WebhookVerificationError } from "../src/receiver.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEXT_SECRET = `whsec_${btoa("the next secret, 32 bytes long!!")}`;
const EXECUTION_ID = "01JEXAMPLEEXECUTION0000001";
const JOB_ID = "01JEXAMPLEJOB0000000000001";
const BODY = JSON.stringify({ report: "daily", n: 3 });

const nowSeconds = () => Math.floor(Date.now() / 1000);

interface Attempt {
  body?: string;
  secrets?: string[];
  id?: string;
  timestamp?: number;
  attempt?: number;
}

/** The headers of one attempt, set as src/consumer/webhook.ts sets them (signed here with Webhook#sign). */
function schedulerHeaders({ body = BODY, secrets = [SECRET], id = EXECUTION_ID, timestamp = nowSeconds(), attempt = 1 }: Attempt = {}) {
  const headers = new Headers({ "content-type": "application/json" });
  const signatures = secrets.map((secret) => new Webhook(secret).sign(id, new Date(timestamp * 1000), body));
  headers.set("webhook-id", id);
  headers.set("webhook-timestamp", String(timestamp));
  headers.set("webhook-signature", signatures.join(" "));
  headers.set("idempotency-key", id);
  headers.set("x-scheduler-attempt", String(attempt));
  headers.set("x-scheduler-job-id", JOB_ID);
  headers.set("user-agent", "edge-scheduler/1");
  return headers;
}

/** the scheduler's own signing (src/core/signing.ts) (WebCrypto), to check the receiver against the real producer. */
async function schedulerSign(secret: string, id: string, timestamp: number, body: string): Promise<string> {
  const raw = Uint8Array.from(atob(secret.slice("whsec_".length)), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${id}.${timestamp}.${body}`));
  return `v1,${Buffer.from(mac).toString("base64")}`;
}

/** What Node gives: a plain record of lower-case names. */
function headerRecord(headers: Headers): Record<string, string> {
  const record: Record<string, string> = {};
  headers.forEach((value, name) => {
    record[name] = value;
  });
  return record;
}

async function failure(promise: Promise<unknown>): Promise<WebhookVerificationError> {
  const error = await promise.then(
    () => expect.fail("expected the delivery to be refused"),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WebhookVerificationError);
  return error as WebhookVerificationError;
}

function receiver(options: Partial<ReceiverOptions> = {}) {
  return new Receiver({ secret: SECRET, ...options });
}

describe("Receiver.verify", () => {
  it("verifies a body that starts with a byte order mark, as bytes and as a Fetch Request (the signature covers it)", async () => {
    const body = `\ufeff${BODY}`;
    const headers = schedulerHeaders({ body });
    const bytes = new TextEncoder().encode(body);
    expect((await receiver().verify(bytes, headers)).rawBody).toBe(body);
    const request = new Request("http://hook.test/", { method: "POST", headers, body: bytes });
    expect((await receiver().verifyRequest(request)).rawBody).toBe(body);
  });

  it("accepts a valid delivery and reads its headers and JSON body", async () => {
    const timestamp = nowSeconds();
    const delivery = await receiver().verify(BODY, schedulerHeaders({ timestamp, attempt: 3 }));
    expect(delivery).toEqual({
      executionId: EXECUTION_ID,
      jobId: JOB_ID,
      attempt: 3,
      timestamp: new Date(timestamp * 1000),
      body: { report: "daily", n: 3 },
      rawBody: BODY,
    });
  });

  it("accepts a delivery signed by the scheduler's own WebCrypto code", async () => {
    const timestamp = nowSeconds();
    const headers = schedulerHeaders({ timestamp });
    headers.set("webhook-signature", await schedulerSign(SECRET, EXECUTION_ID, timestamp, BODY));
    expect((await receiver().verify(BODY, headers)).body).toEqual({ report: "daily", n: 3 });
  });

  it("reads an empty body as null", async () => {
    const delivery = await receiver().verify("", schedulerHeaders({ body: "" }));
    expect(delivery.body).toBeNull();
    expect(delivery.rawBody).toBe("");
  });

  it("keeps a body that is not JSON as its text", async () => {
    const body = "plain text, not {json";
    expect((await receiver().verify(body, schedulerHeaders({ body }))).body).toBe(body);
  });

  it("decodes a byte body as UTF-8", async () => {
    const body = JSON.stringify({ city: "Zürich", mood: "🙂" });
    const delivery = await receiver().verify(new TextEncoder().encode(body), schedulerHeaders({ body }));
    expect(delivery.body).toEqual({ city: "Zürich", mood: "🙂" });
  });

  it("takes a Node-style header record with any case and repeated lines", async () => {
    const headers = headerRecord(schedulerHeaders({ secrets: [NEXT_SECRET, SECRET] }));
    const { "webhook-id": id, "webhook-signature": signatures, ...rest } = headers;
    const record = { ...rest, "Webhook-Id": id, "webhook-signature": signatures!.split(" "), "x-absent": undefined };
    expect((await receiver().verify(BODY, record)).executionId).toBe(EXECUTION_ID);
  });

  it("defaults attempt to 1 and jobId to null when the scheduler headers are absent", async () => {
    const headers = schedulerHeaders();
    headers.delete("x-scheduler-attempt");
    headers.delete("x-scheduler-job-id");
    expect(await receiver().verify(BODY, headers)).toMatchObject({ attempt: 1, jobId: null });
  });

  it("refuses a tampered body", async () => {
    const error = await failure(receiver().verify(BODY.replace("3", "4"), schedulerHeaders()));
    expect(error.code).toBe("bad_signature");
  });

  it("refuses a tampered webhook-id", async () => {
    const headers = schedulerHeaders();
    headers.set("webhook-id", "01JEXAMPLEEXECUTION0000002");
    expect((await failure(receiver().verify(BODY, headers))).code).toBe("bad_signature");
  });

  it("refuses a delivery signed with another secret", async () => {
    const error = await failure(receiver().verify(BODY, schedulerHeaders({ secrets: [NEXT_SECRET] })));
    expect(error.code).toBe("bad_signature");
    expect(error.message).toContain("the secret");
  });

  describe("secret rotation", () => {
    const rotating = () => receiver({ secret: [SECRET, NEXT_SECRET] });

    it("accepts a delivery signed with either secret", async () => {
      await expect(rotating().verify(BODY, schedulerHeaders({ secrets: [SECRET] }))).resolves.toBeDefined();
      await expect(rotating().verify(BODY, schedulerHeaders({ secrets: [NEXT_SECRET] }))).resolves.toBeDefined();
    });

    it("accepts a header with two signatures when either secret is known", async () => {
      const headers = schedulerHeaders({ secrets: [SECRET, NEXT_SECRET] });
      expect(headers.get("webhook-signature")!.split(" ")).toHaveLength(2);
      await expect(receiver({ secret: SECRET }).verify(BODY, headers)).resolves.toBeDefined();
      await expect(receiver({ secret: NEXT_SECRET }).verify(BODY, headers)).resolves.toBeDefined();
    });

    it("refuses a delivery signed with neither", async () => {
      const other = `whsec_${btoa("a third secret that nobody knows")}`;
      const error = await failure(rotating().verify(BODY, schedulerHeaders({ secrets: [other] })));
      expect(error.message).toContain("any of the 2 secrets");
    });
  });

  describe("timestamp", () => {
    const at = Date.now();
    const seconds = Math.floor(at / 1000);
    const fixedClock = (options: Partial<ReceiverOptions> = {}) => receiver({ now: () => at, ...options });

    it("refuses a timestamp older than the tolerance and says by how much", async () => {
      const error = await failure(fixedClock().verify(BODY, schedulerHeaders({ timestamp: seconds - 301 })));
      expect(error.code).toBe("stale");
      expect(error.message).toBe("webhook-timestamp is 301 s old; the tolerance is 300 s");
    });

    it("refuses a timestamp from the future", async () => {
      const error = await failure(fixedClock().verify(BODY, schedulerHeaders({ timestamp: seconds + 301 })));
      expect(error.code).toBe("stale");
      expect(error.message).toBe("webhook-timestamp is 301 s in the future; the tolerance is 300 s");
    });

    it("accepts a timestamp within the tolerance", async () => {
      await expect(fixedClock().verify(BODY, schedulerHeaders({ timestamp: seconds - 250 }))).resolves.toBeDefined();
    });

    it("applies a tolerance stricter than standardwebhooks' 5 minutes", async () => {
      const headers = schedulerHeaders({ timestamp: seconds - 120 });
      expect(() => new Webhook(SECRET).verify(BODY, headerRecord(headers))).not.toThrow();
      const error = await failure(fixedClock({ toleranceSeconds: 60 }).verify(BODY, headers));
      expect(error.message).toBe("webhook-timestamp is 120 s old; the tolerance is 60 s");
    });

    it("reports standardwebhooks' own clock check as stale when `now` is another clock", async () => {
      const tenMinutesAgo = at - 600_000;
      const headers = schedulerHeaders({ timestamp: Math.floor(tenMinutesAgo / 1000) });
      const error = await failure(receiver({ now: () => tenMinutesAgo }).verify(BODY, headers));
      expect(error.code).toBe("stale");
      expect(error.message).toContain("system clock");
    });

    it("refuses a timestamp that is not whole seconds", async () => {
      const headers = schedulerHeaders();
      headers.set("webhook-timestamp", "2025-01-01T00:00:00Z");
      expect((await failure(receiver().verify(BODY, headers))).code).toBe("invalid_headers");
    });

    it("cannot be configured wider than standardwebhooks allows", () => {
      expect(() => receiver({ toleranceSeconds: 301 })).toThrow(RangeError);
    });
  });

  it("names the missing headers", async () => {
    const headers = schedulerHeaders();
    headers.delete("webhook-timestamp");
    headers.delete("webhook-signature");
    const error = await failure(receiver().verify(BODY, headers));
    expect(error.code).toBe("missing_headers");
    expect(error.message).toBe("missing header: webhook-timestamp, webhook-signature");
  });

  it("refuses an attempt number that is not a positive integer", async () => {
    const headers = schedulerHeaders();
    headers.set("x-scheduler-attempt", "0");
    expect((await failure(receiver().verify(BODY, headers))).code).toBe("invalid_headers");
  });

  describe("replayGuard", () => {
    function guarded() {
      const seen = new Set<string>();
      const replayGuard = async (key: string) => seen.has(key) || !seen.add(key);
      return { seen, receiver: receiver({ replayGuard }) };
    }

    it("refuses the same id and timestamp twice", async () => {
      const { seen, receiver } = guarded();
      const timestamp = nowSeconds();
      await receiver.verify(BODY, schedulerHeaders({ timestamp }));
      expect(seen).toEqual(new Set([`${EXECUTION_ID}.${timestamp}`]));
      const error = await failure(receiver.verify(BODY, schedulerHeaders({ timestamp })));
      expect(error.code).toBe("replayed");
      expect(error.message).toContain(EXECUTION_ID);
    });

    it("accepts a retry: the same id with a new timestamp", async () => {
      const { receiver } = guarded();
      const timestamp = nowSeconds();
      await receiver.verify(BODY, schedulerHeaders({ timestamp, attempt: 1 }));
      const retry = await receiver.verify(BODY, schedulerHeaders({ timestamp: timestamp + 1, attempt: 2 }));
      expect(retry).toMatchObject({ executionId: EXECUTION_ID, attempt: 2 });
    });

    it("is not consulted for a forged delivery", async () => {
      const { seen, receiver } = guarded();
      await failure(receiver.verify(BODY, schedulerHeaders({ secrets: [NEXT_SECRET] })));
      expect(seen.size).toBe(0);
    });
  });
});

describe("Receiver.verifyRequest", () => {
  const url = "https://receiver.example/hooks/report";

  it("verifies a Fetch Request", async () => {
    const request = new Request(url, { method: "POST", headers: schedulerHeaders(), body: BODY });
    expect(await receiver().verifyRequest(request)).toMatchObject({ executionId: EXECUTION_ID, body: { report: "daily", n: 3 } });
  });

  it("verifies a GET without a body", async () => {
    const request = new Request(url, { headers: schedulerHeaders({ body: "" }) });
    expect((await receiver().verifyRequest(request)).body).toBeNull();
  });

  it("says so when the body was already read", async () => {
    const request = new Request(url, { method: "POST", headers: schedulerHeaders(), body: BODY });
    await request.json();
    await expect(receiver().verifyRequest(request)).rejects.toThrow(/already read/);
  });
});

describe("verifyWebhook (Hono middleware)", () => {
  const app = new Hono<{ Variables: { delivery: Delivery } }>();
  app.post("/hook", verifyWebhook({ secret: SECRET }), (c) => c.json(c.get("delivery")));

  it("passes the delivery to the handler", async () => {
    const response = await app.request("/hook", { method: "POST", headers: schedulerHeaders(), body: BODY });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ executionId: EXECUTION_ID, body: { report: "daily", n: 3 } });
  });

  it("answers 401 with the reason", async () => {
    const response = await app.request("/hook", { method: "POST", headers: schedulerHeaders(), body: `${BODY} ` });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: "bad_signature" });
  });

  it("answers a replay 503, so that a genuine duplicate is retried rather than failed for good", async () => {
    const seen = new Set<string>();
    const guarded = new Hono<{ Variables: { delivery: Delivery } }>();
    const replayGuard = (key: string) => {
      if (seen.has(key)) return true;
      seen.add(key);
      return false;
    };
    guarded.post("/hook", verifyWebhook({ secret: SECRET, replayGuard }), (c) => c.text("ok"));
    const headers = schedulerHeaders();
    expect((await guarded.request("/hook", { method: "POST", headers, body: BODY })).status).toBe(200);
    const replay = await guarded.request("/hook", { method: "POST", headers, body: BODY });
    expect(replay.status).toBe(503);
    expect(await replay.json()).toMatchObject({ error: "replayed" });
  });
});

describe("Receiver.verifyNode against a node:http server", () => {
  let server: Server;
  let origin: string;

  /** What express.json() does: reads the stream and leaves only the parsed body. */
  async function parseJson(req: IncomingMessage & { body?: unknown }) {
    let text = "";
    for await (const chunk of req) text += chunk;
    req.body = JSON.parse(text);
  }

  /** What express.raw() does: reads the stream and keeps its bytes as req.body. */
  async function keepRaw(req: IncomingMessage & { body?: unknown }) {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk);
    req.body = Buffer.concat(chunks);
  }

  const middleware: Record<string, (req: IncomingMessage) => Promise<void>> = {
    "/hook": async () => {},
    "/json-first": parseJson,
    "/raw-first": keepRaw,
  };

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const send = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    try {
      await middleware[req.url!]!(req);
      send(200, await receiver().verifyNode(req));
    } catch (error) {
      if (error instanceof WebhookVerificationError) send(401, { error: error.code, message: error.message });
      else send(500, { name: (error as Error).name, message: (error as Error).message });
    }
  }

  beforeAll(async () => {
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  });

  const post = (path: string, headers = schedulerHeaders(), body = BODY) => fetch(`${origin}${path}`, { method: "POST", headers, body });

  it("verifies a real delivery read from the stream", async () => {
    const response = await post("/hook", schedulerHeaders({ attempt: 2 }));
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ executionId: EXECUTION_ID, jobId: JOB_ID, attempt: 2, body: { report: "daily", n: 3 } });
  });

  it("refuses a tampered body", async () => {
    const response = await post("/hook", schedulerHeaders(), `${BODY} `);
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: "bad_signature" });
  });

  it("uses a raw body a framework kept", async () => {
    const response = await post("/raw-first");
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ rawBody: BODY });
  });

  it("says to keep the raw body when it was already parsed", async () => {
    const response = await post("/json-first");
    expect(response.status).toBe(500);
    const { name, message } = await response.json();
    expect(name).toBe("TypeError");
    expect(message).toContain("already read");
    expect(message).toContain("express.raw");
  });
});
