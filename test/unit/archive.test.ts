/**
 * The archive's pure part (src/archive/archive.ts): the layout an id alone finds, one object per
 * tenant and hour, lines in id order, the same bytes for the same executions (a retried write).
 */
import { describe, expect, it } from "vitest";
import { executionOfArchived, gunzip, gzip, hourPrefix, type LeavingExecution, objectsOf } from "../../src/archive/archive";
import { newId, oneOffExecutionId } from "../../src/core/id";
import type { ExecutionView } from "../../src/use-cases/present";

const HOUR = 3_600_000;
const at = Date.UTC(2026, 11, 2, 14, 30);

function leaving(tenant: string, createdAt: number, seed: number, status: ExecutionView["status"] = "succeeded"): LeavingExecution {
  const id = oneOffExecutionId(newId("job", createdAt, new Uint8Array(16).fill(seed)));
  return {
    tenant,
    kind: "one-off",
    jobName: `job ${seed}`,
    labels: JSON.stringify({ seed: String(seed) }),
    view: {
      id,
      jobId: `job_${id.slice(4)}`,
      dueAt: createdAt + 1000,
      status,
      attempts: 1,
      attemptLog: [
        {
          attempt: 1,
          dueAt: createdAt + 1000,
          startedAt: createdAt + 1010,
          finishedAt: createdAt + 1050,
          outcome: status,
          httpStatus: 200,
          error: null,
          response: "ok",
        },
      ],
      lastHttpStatus: 200,
      lastError: null,
      deadReason: null,
      finishedAt: createdAt + 1050,
    },
  };
}

describe("archive layout", () => {
  it("names a tenant's hour from an instant, URI-encoding the tenant", () => {
    expect(hourPrefix("acme", at)).toBe("executions/tenant=acme/date=2026-12-02/hour=14/");
    expect(hourPrefix("a/b c", at + HOUR)).toBe("executions/tenant=a%2Fb%20c/date=2026-12-02/hour=15/");
    expect(hourPrefix("acme", Date.UTC(2026, 11, 31, 23, 59, 59, 999))).toBe("executions/tenant=acme/date=2026-12-31/hour=23/");
  });

  it("puts a page in one object per tenant and hour of the execution id, lines in id order, keyed by the first id and a hash of the content", async () => {
    const page = [leaving("acme", at + 5, 3), leaving("acme", at, 9), leaving("globex", at, 1), leaving("acme", at + HOUR, 2)];
    const objects = await objectsOf(page);
    expect(objects.map((o) => [o.key.split("/").slice(1, 4).join("/"), o.count])).toEqual([
      ["tenant=acme/date=2026-12-02/hour=14", 2],
      ["tenant=acme/date=2026-12-02/hour=15", 1],
      ["tenant=globex/date=2026-12-02/hour=14", 1],
    ]);
    const first = objects[0]!;
    const ids = first.text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).id as string);
    expect(ids).toEqual([...ids].sort());
    expect(first.key).toMatch(new RegExp(`^${hourPrefix("acme", at)}${ids[0]}\\.[0-9a-f]{16}\\.ndjson\\.gz$`));
    expect([first.first, first.last]).toEqual([ids[0], ids[1]]);
    // a line: the execution as the API shows it, with its tenant, job name, labels and attempts
    expect(JSON.parse(first.text.split("\n")[0]!)).toMatchObject({
      tenant: "acme",
      kind: "one-off",
      jobName: expect.stringMatching(/^job \d$/),
      labels: { seed: expect.any(String) },
      status: "succeeded",
      dueAt: expect.stringMatching(/^2026-12-02T14:30:01/),
      attemptLog: [expect.objectContaining({ attempt: 1, httpStatus: 200, responseExcerpt: "ok", lagMs: 10 })],
    });
  });

  it("writes the same bytes for the same executions in any order (a retried write is the same object)", async () => {
    const page = [leaving("acme", at, 1), leaving("acme", at + 10, 2), leaving("acme", at + 20, 3, "dead")];
    const [a] = await objectsOf(page);
    const [b] = await objectsOf([...page].reverse());
    expect(b!.key).toBe(a!.key);
    expect(await gzip(b!.text)).toEqual(await gzip(a!.text));
    expect(await gunzip(await gzip(a!.text))).toBe(a!.text);
  });

  it("gives other content another key: an object is never overwritten with other executions", async () => {
    const page = [leaving("acme", at, 1), leaving("acme", at + 10, 2)];
    const [whole] = await objectsOf(page);
    const [less] = await objectsOf(page.slice(0, 1));
    const [changed] = await objectsOf([page[0]!, { ...page[1]!, view: { ...page[1]!.view, status: "dead" } }]);
    expect(less!.first).toBe(whole!.first);
    expect(new Set([whole!.key, less!.key, changed!.key]).size).toBe(3);
  });

  it("reads back the execution as GET /v1/executions/:id shows it", async () => {
    const [object] = await objectsOf([leaving("acme", at, 4, "dead")]);
    const line = JSON.parse(object!.text);
    expect(Object.keys(executionOfArchived(line)).sort()).toEqual(
      ["attempts", "callbacks", "deadReason", "dueAt", "finishedAt", "id", "jobId", "lastError", "lastHttpStatus", "status"].sort(),
    );
    expect(executionOfArchived(line)).toMatchObject({ status: "dead", attempts: 1 });
  });
});

describe("archive size", () => {
  it("measures the gzip bytes per execution of a page of 5,000 typical webhook executions (printed; docs/capacity.md)", async () => {
    const page = Array.from({ length: 5000 }, (_, i) => {
      const e = leaving("acme", at + i * 7, 0);
      const id = oneOffExecutionId(newId("job", at + i * 7, crypto.getRandomValues(new Uint8Array(16))));
      const lag = 20 + (i % 50);
      return {
        ...e,
        jobName: `invoice-${i % 20}`,
        labels: JSON.stringify({ team: "billing", env: "prod" }),
        view: {
          ...e.view,
          id,
          jobId: `job_${id.slice(4)}`,
          attemptLog: [
            { ...e.view.attemptLog[0]!, startedAt: e.view.dueAt + lag, finishedAt: e.view.dueAt + lag + 180, response: '{"ok":true}' },
          ],
        },
      };
    });
    const [object] = await objectsOf(page);
    const bytes = (await gzip(object!.text)).byteLength;
    const perExecution = bytes / page.length;
    console.log(
      `archive: ${page.length} executions, ${object!.text.length} bytes of NDJSON, ${bytes} bytes gzip: ${perExecution.toFixed(1)} bytes per execution (${(object!.text.length / page.length).toFixed(0)} uncompressed)`,
    );
    expect(perExecution).toBeLessThan(400);
  });
});
