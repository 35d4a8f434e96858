/**
 * What goes in comes out exactly (issue 11, items 1-3): a body the API accepts reaches its target
 * as the bytes the README documents (a string as its UTF-8 bytes, JSON as its compact
 * serialization) and verifies with the Standard Webhooks library; what cannot be sent as given
 * is refused with a 400 naming the field: lone surrogates anywhere (strings and keys, bodies,
 * metadata), raw bytes that are not UTF-8, numbers a 64-bit float would change; headers in the
 * scheduler's namespaces are refused however they are spelled.
 *
 * Property-based (fast-check) over arbitrary bodies, each created through the API, fired by its
 * bucket's alarm on the file's virtual clock, delivered by the real consumer to the loopback
 * receiver, which records the exact bytes.
 */
import { env, exports } from "cloudflare:workers";
import fc from "fast-check";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  api,
  captureFiresForFile,
  countAll,
  dispatchNow,
  fileClock,
  fire,
  KEYS,
  newExecution,
  received,
  receiverUrl,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const SECRET = env.WEBHOOK_SECRET!;
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

interface Delivered {
  bytes: Uint8Array;
  headers: Record<string, string>;
}

/** Creates a one-off job with this target body (already JSON text of the create request), fires it, and returns what the target got. */
async function deliverBody(requestText: string): Promise<Delivered> {
  const execution = await newExecution(JSON.parse(requestText) as Record<string, unknown>).catch(async () => {
    throw new Error(`create refused: ${await (await api("/v1/jobs", { method: "POST", body: requestText })).text()}`);
  });
  const message = await dispatchNow({ stub: execution.stub, executionId: execution.exe.id }, clock, sent);
  expect((await fire([message])).explicitAcks).toEqual(["m0"]);
  const path = new URL(execution.job.target.url).pathname + new URL(execution.job.target.url).search;
  const [got] = await received(path);
  if (!got) throw new Error("the receiver got nothing");
  return { bytes: Uint8Array.from(atob(got.bodyBase64), (c) => c.charCodeAt(0)), headers: got.headers };
}

/** POST /v1/jobs with exactly these bytes (and this content-type, unless null); returns status and body. */
async function post(
  text: string | Uint8Array,
  contentType: string | null = "application/json",
): Promise<{ status: number; body: { error?: { code: string; field: string | null; message: string } } }> {
  const headers: Record<string, string> = { authorization: `Bearer ${KEYS.acme}` };
  if (contentType !== null) headers["content-type"] = contentType;
  const res = await exports.default.fetch("http://scheduler/v1/jobs", { method: "POST", headers, body: text });
  return { status: res.status, body: (await res.json()) as never };
}

const target = () => `${receiverUrl()}${uniquePath()}`;

/**
 * Does a receiver holding the secret accept these bytes? Webhook.verify checks id, timestamp and
 * signature, then JSON-parses the payload: a non-JSON body (a plain string) fails only that last
 * step, so its signature is checked with the library's own sign().
 */
function verifies(delivered: Delivered): boolean {
  const payload = utf8.decode(delivered.bytes);
  const webhook = new Webhook(SECRET);
  try {
    webhook.verify(payload, delivered.headers);
    return true;
  } catch (error) {
    if (error instanceof WebhookVerificationError) return false;
    const at = new Date(Number(delivered.headers["webhook-timestamp"]) * 1000);
    return delivered.headers["webhook-signature"]!.split(" ").includes(webhook.sign(delivered.headers["webhook-id"]!, at, payload));
  }
}

/** Any JSON text fast-check makes, and well-formed Unicode strings of every plane (graphemes, astral, combining). */
const wellFormedString = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "grapheme-ascii", minLength: 30_000, maxLength: 60_000 }),
);
/** Strings of arbitrary UTF-16 code units: lone surrogates included. */
const anyUtf16 = fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 12 }).map((units) => String.fromCharCode(...units));

describe("accepted bodies arrive as documented and verify", () => {
  it("a string body is sent as its UTF-8 bytes, and the signature verifies (property)", async () => {
    await fc.assert(
      fc.asyncProperty(wellFormedString, async (body) => {
        const delivered = await deliverBody(JSON.stringify({ target: { url: target(), body } }));
        expect(delivered.bytes).toEqual(new TextEncoder().encode(body));
        expect(verifies(delivered)).toBe(true);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  it("a JSON body is sent as its compact serialization with content-type application/json, and verifies (property)", async () => {
    const json = fc.jsonValue({ maxDepth: 4 }).filter((v) => v !== null && typeof v !== "string"); // null = no body; a string is sent as is
    await fc.assert(
      fc.asyncProperty(json, async (body) => {
        const delivered = await deliverBody(JSON.stringify({ target: { url: target(), body } }));
        expect(utf8.decode(delivered.bytes)).toBe(JSON.stringify(body));
        expect(delivered.headers["content-type"]).toBe("application/json");
        expect(verifies(delivered)).toBe(true);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  it("numbers that denote the same value in their shortest form are accepted and sent in that form (1.0 -> 1, 1E2 -> 100, -0 -> 0)", async () => {
    const delivered = await deliverBody(
      `{"target":{"url":"${target()}","body":{"a":1.0,"b":1E2,"c":-0,"d":0.1,"e":1e-7,"f":9007199254740992}}}`,
    );
    expect(utf8.decode(delivered.bytes)).toBe('{"a":1,"b":100,"c":0,"d":0.1,"e":1e-7,"f":9007199254740992}');
    expect(verifies(delivered)).toBe(true);
  });
});

describe("what cannot be sent as given is refused, naming the field", () => {
  it("a lone surrogate in a string body, an object body's value or key, metadata's value or key, or the name: 400 naming it; well-formed strings pass (property)", async () => {
    await fc.assert(
      fc.asyncProperty(anyUtf16, fc.constantFrom("body", "bodyValue", "bodyKey", "metaValue", "metaKey", "name"), async (text, place) => {
        const url = target();
        const request = {
          body: { target: { url, body: text } },
          bodyValue: { target: { url, body: { nested: [1, { x: text }] } } },
          bodyKey: { target: { url, body: { [text]: 1 } } },
          metaValue: { target: { url }, metadata: { note: text } },
          metaKey: { target: { url }, metadata: { [text]: "v" } },
          name: { target: { url }, name: text || "x" },
        }[place];
        const field = {
          body: "target.body",
          bodyValue: "target.body.nested[1].x",
          bodyKey: `target.body.${JSON.stringify(text).slice(1, -1)}`,
          metaValue: "metadata.note",
          metaKey: `metadata.${JSON.stringify(text).slice(1, -1)}`,
          name: "name",
        }[place];
        const { status, body } = await post(JSON.stringify(request, null, 0)); // JSON.stringify escapes a lone surrogate as \udxxx
        if (text.isWellFormed()) {
          expect(status, JSON.stringify(body)).toBe(201);
        } else {
          expect(status).toBe(400);
          expect(body.error).toMatchObject({ code: "invalid_field", field });
          expect(body.error!.message).toMatch(/well-formed Unicode/);
        }
      }),
      { numRuns: 120 },
    );
  }, 120_000);

  it("a leading UTF-8 byte order mark is dropped, as RFC 8259 allows", async () => {
    const text = new TextEncoder().encode(JSON.stringify({ target: { url: target() } }));
    expect((await post(new Uint8Array([0xef, 0xbb, 0xbf, ...text]))).status).toBe(201);
  });

  it("raw bytes that are not UTF-8 are a 400 on the body; nothing is created", async () => {
    const before = await countJobs();
    for (const bad of [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf0, 0x28, 0x8c, 0x28], [0xe2, 0x82]]) {
      const prefix = new TextEncoder().encode(`{"target":{"url":"${target()}","body":"`);
      const suffix = new TextEncoder().encode('"}}');
      const { status, body } = await post(new Uint8Array([...prefix, ...bad, ...suffix]));
      expect([status, body.error?.code, body.error?.field]).toEqual([400, "invalid_body", "body"]);
      expect(body.error!.message).toMatch(/UTF-8/);
    }
    expect(await countJobs()).toBe(before);
  });

  it("a number a 64-bit float would change (1e400, 12345678901234567890, 1e-400, 0.10000000000000000001) is a 400 naming it, in the body and in metadata", async () => {
    const url = target();
    for (const [text, field] of [
      [`{"target":{"url":"${url}","body":{"n":1e400}}}`, "target.body.n"],
      [`{"target":{"url":"${url}","body":{"ok":1,"big":12345678901234567890}}}`, "target.body.big"],
      [`{"target":{"url":"${url}","body":[0, 1e-400]}}`, "target.body[1]"],
      [`{"target":{"url":"${url}","body":0.10000000000000000001}}`, "target.body"],
      [`{"target":{"url":"${url}"},"metadata":{"id":12345678901234567890}}`, "metadata.id"],
    ] as const) {
      const { status, body } = await post(text);
      expect([status, body.error?.code, body.error?.field], text).toEqual([400, "invalid_field", field]);
      expect(body.error!.message).toMatch(/send it as a string/);
    }
    // outside free-form JSON a string is no way out: the message says only what is wrong
    const timeout = await post(`{"target":{"url":"${url}"},"timeoutMs":1e400}`);
    expect([timeout.status, timeout.body.error?.field]).toEqual([400, "timeoutMs"]);
    expect(timeout.body.error!.message).not.toMatch(/string/);
    // the same number as a string body is kept to the byte
    const delivered = await deliverBody(JSON.stringify({ target: { url: target(), body: '{"n":1e400,"big":12345678901234567890}' } }));
    expect(utf8.decode(delivered.bytes)).toBe('{"n":1e400,"big":12345678901234567890}');
  });

  it("numbers in random spellings: accepted exactly when the delivered text denotes the same number (property)", async () => {
    const numberText = fc
      .tuple(
        fc.boolean(),
        fc.stringMatching(/^(0|[1-9][0-9]{0,24})$/),
        fc.option(fc.stringMatching(/^[0-9]{1,20}$/)),
        fc.option(fc.integer({ min: -400, max: 400 })),
      )
      .map(([neg, int, frac, exp]) => `${neg ? "-" : ""}${int}${frac === null ? "" : `.${frac}`}${exp === null ? "" : `e${exp}`}`);
    await fc.assert(
      fc.asyncProperty(numberText, async (n) => {
        const { status, body } = await post(`{"target":{"url":"${target()}"},"metadata":{"n":${n}}}`);
        const parsed = JSON.parse(n) as number;
        const exact = Number.isFinite(parsed) && sameDecimal(n, JSON.stringify(parsed));
        expect(status, `${n}: ${JSON.stringify(body)}`).toBe(exact ? 201 : 400);
        if (!exact) expect(body.error?.field).toBe("metadata.n");
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});

describe("reserved headers and media types", () => {
  it("refuses every header in the webhook-* and x-scheduler-* namespaces and the connection's own, in any case; other headers pass", async () => {
    for (const name of [
      "webhook-id",
      "Webhook-Custom",
      "webhook-signature-v2",
      "X-Scheduler-Custom",
      "x-scheduler-attempt",
      "Idempotency-Key",
      "host",
      "Content-Length",
      "transfer-encoding",
      "connection",
      "upgrade",
      "te",
    ]) {
      const { status, body } = await post(JSON.stringify({ target: { url: target(), headers: { [name]: "x" } } }));
      expect([status, body.error?.field], name).toEqual([400, `target.headers.${name}`]);
    }
    for (const name of ["x-webhook-id", "webhooks-id", "x-schedulerx", "authorization", "x-custom"]) {
      expect((await post(JSON.stringify({ target: { url: target(), headers: { [name]: "x" } } }))).status, name).toBe(201);
    }
  });

  it("a body sent with a media type other than JSON is a 415; application/json with charset utf-8 and +json types pass; no content-type is read as JSON", async () => {
    const text = JSON.stringify({ target: { url: target() } });
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/json; charset=latin1",
    ]) {
      const { status, body } = await post(text, type);
      expect([status, body.error?.code, body.error?.field], type).toEqual([415, "unsupported_media_type", "content-type"]);
    }
    for (const type of ["application/json", "Application/JSON; charset=UTF-8", "application/merge-patch+json"]) {
      expect((await post(text, type)).status, type).toBe(201);
    }
    expect((await post(new TextEncoder().encode(text), null)).status).toBe(201); // no content-type at all
  });
});

async function countJobs(): Promise<number> {
  return countAll("SELECT COUNT(*) AS n FROM jobs");
}

/** Test-side oracle: two decimal texts denote the same number (BigInt arithmetic, independent of the source). */
function sameDecimal(a: string, b: string): boolean {
  const norm = (t: string) => {
    const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(t)!;
    const digits = BigInt(m[2]! + (m[3] ?? ""));
    const exponent = Number(m[4] ?? 0) - (m[3] ?? "").length;
    return { digits, exponent, negative: m[1] === "-" && digits !== 0n };
  };
  const x = norm(a);
  const y = norm(b);
  if (x.negative !== y.negative) return false;
  // compare digits × 10^exponent exactly by scaling to the smaller exponent
  const e = Math.min(x.exponent, y.exponent);
  return x.digits * 10n ** BigInt(x.exponent - e) === y.digits * 10n ** BigInt(y.exponent - e);
}
