/**
 * The window a single change and a bulk action's change share (issue 36 item 5): a job's completion
 * reaches D1 between the request's read of the job and its version-guarded write. Failed until
 * changeJob guards the from-state in SQL (db/change-job.ts changeJob); the D1 UPDATE is held while the
 * bucket's flush writes the completion.
 */
import { describe, expect, it } from "vitest";
import {
  api,
  bucketStub,
  captureFiresForFile,
  D1_PROTOTYPE,
  dispatchOf,
  FLUSH_DELAY_MS,
  fileClock,
  fire,
  jobRow,
  newExecution,
  receiverUrl,
  runAlarm,
  spyOnD1,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);
describe("a change racing the job's completion between its read and its write (issue 36 item 5)", () => {
  it("a single DELETE whose job completes between its read and its write is refused, and the job stays completed", async () => {
    const done = await newExecution({ target: { url: `${receiverUrl()}/ok` }, delay: "1m" });
    await fire([await dispatch(done)]); // succeeded in its bucket; not yet in D1
    const original = D1_PROTOTYPE.prepare;
    let ran = false;
    let seen = "";
    const spy = spyOnD1("prepare").mockImplementation(function (this: D1Database, query: string) {
      const stmt = original.call(this, query);
      if (ran || !/^update "jobs" set/i.test(query) || !query.includes('"version" = ?')) return stmt;
      ran = true;
      const wrap = (s: D1PreparedStatement): D1PreparedStatement =>
        new Proxy(s, {
          get(target, prop) {
            const value = Reflect.get(target, prop);
            if (typeof value !== "function") return value;
            if (prop === "bind") return (...args: unknown[]) => wrap(value.apply(target, args));
            return async (...args: unknown[]) => {
              spy.mockRestore();
              clock.advance(FLUSH_DELAY_MS);
              await runAlarm(bucketStub(done.exe.bucket)); // the completion lands now, from this request's context
              seen = (await jobRow(done.job.id))?.status ?? "none";
              return value.apply(target, args);
            };
          },
        });
      return wrap(stmt);
    } as D1Database["prepare"]);
    let res: Response;
    try {
      res = await api(`/v1/jobs/${done.job.id}`, { method: "DELETE" });
    } finally {
      spy.mockRestore();
    }
    expect(ran).toBe(true);
    expect(seen).toBe("completed");
    expect((await jobRow(done.job.id))?.status).toBe("completed");
    expect(res.status).toBe(409);
  });
});
