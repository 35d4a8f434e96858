/**
 * Production's queue delay as the local emulation draws it (src/core/queue-delay.ts, issue 35 item
 * 7) and the setting that turns it on (QUEUE_LATENCY in src/config.ts, off by default).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { FireGroup } from "../../src/bucket/protocol";
import { ConfigSchema, configOf } from "../../src/config";
import { drawDelayMs } from "../../src/core/queue-delay";
import { withQueueLatency } from "../../src/platform/queue-latency";
import { mulberry32 } from "./prng";

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

describe("drawDelayMs", () => {
  it("draws a log-normal with the given median and 99th percentile, and a long tail", () => {
    const rand = mulberry32(35);
    const draws = Array.from({ length: 20_000 }, () => drawDelayMs({ medianMs: 60, p99Ms: 400 }, rand)).sort((a, b) => a - b);
    expect(quantile(draws, 0.5)).toBeGreaterThan(57);
    expect(quantile(draws, 0.5)).toBeLessThan(63);
    expect(quantile(draws, 0.99)).toBeGreaterThan(360);
    expect(quantile(draws, 0.99)).toBeLessThan(440);
    // jitter both ways: a tenth of the messages take under half the median, a tenth over twice it
    expect(quantile(draws, 0.1)).toBeLessThan(30);
    expect(quantile(draws, 0.9)).toBeGreaterThan(120);
    expect(draws[0]).toBeGreaterThan(0);
    expect(draws[draws.length - 1]).toBeLessThanOrEqual(4_000); // cut at 10 x p99
  });

  it("is the same sequence for the same seed, and a constant delay when p99 is the median", () => {
    const d = { medianMs: 40, p99Ms: 300 };
    const a = mulberry32(7);
    const b = mulberry32(7);
    expect(Array.from({ length: 5 }, () => drawDelayMs(d, a))).toEqual(Array.from({ length: 5 }, () => drawDelayMs(d, b)));
    expect(drawDelayMs({ medianMs: 25, p99Ms: 25 }, mulberry32(1))).toBe(25);
  });
});

describe("QUEUE_LATENCY", () => {
  it("is off by default and reads median_ms,p99_ms", () => {
    expect(ConfigSchema.parse({}).QUEUE_LATENCY).toBeNull();
    expect(ConfigSchema.parse({ QUEUE_LATENCY: "" }).QUEUE_LATENCY).toBeNull();
    expect(ConfigSchema.parse({ QUEUE_LATENCY: "60, 400" }).QUEUE_LATENCY).toEqual({ medianMs: 60, p99Ms: 400 });
  });

  it("wraps the fire queues only when set", async () => {
    const arrived: string[] = [];
    const queue = {
      sendBatch: async (messages: Iterable<MessageSendRequest<FireGroup>>) => {
        for (const m of messages) arrived.push(m.body.executions[0]!.executionId);
        return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
      },
    } as unknown as Queue<FireGroup>;
    expect(configOf({ FIRE_QUEUE_0: queue } as unknown as Env).fireQueues).toEqual([queue]);
    const [delayed] = configOf({ FIRE_QUEUE_0: queue, QUEUE_LATENCY: "5,5" } as unknown as Env).fireQueues;
    expect(delayed).not.toBe(queue);
    vi.spyOn(console, "log").mockImplementation(() => {});
    const sent = delayed!.sendBatch([{ body: { v: 2, bucket: 0, executions: [{ executionId: "x", dueAt: 0, tenant: "t" }] } }]);
    expect(arrived).toEqual([]);
    await sent;
    expect(arrived).toEqual(["x"]);
    vi.restoreAllMocks();
  });

  it.each(["60", "400,60", "0,10", "a,b", "60,400,1", "10,70000"])("refuses %j, naming the setting", (value) => {
    const parsed = ConfigSchema.safeParse({ QUEUE_LATENCY: value });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(["QUEUE_LATENCY"]);
  });
});

describe("withQueueLatency (the emulation's shell)", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  const group = (bucket: number, id: string): MessageSendRequest<FireGroup> => ({
    body: { v: 2, bucket, executions: [{ executionId: id, dueAt: 0, tenant: "t" }] },
  });

  it("hands each message to the queue after its own draw: a later one may overtake, and the call returns once all are in", async () => {
    vi.useFakeTimers();
    vi.spyOn(console, "log").mockImplementation(() => {});
    const arrived: string[] = [];
    const queue = {
      sendBatch: async (messages: Iterable<MessageSendRequest<FireGroup>>) => {
        for (const m of messages) arrived.push(m.body.executions[0]!.executionId);
        return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
      },
    } as unknown as Queue<FireGroup>;
    // Box-Muller's two uniforms: (0.999, 0) draws far above the median, (0.999, 0.5) far below it
    const uniforms = [0.999, 0, 0.999, 0.5];
    const delayed = withQueueLatency(queue, { medianMs: 60, p99Ms: 400 }, () => uniforms.shift()!);
    let done = false;
    const sent = delayed.sendBatch([group(0, "slow"), group(1, "fast")]).then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(30);
    expect(arrived).toEqual(["fast"]);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(4_000);
    await sent;
    expect(arrived).toEqual(["fast", "slow"]);
  });

  it("fails the call when the queue refuses the send (the bucket then schedules its executions again)", async () => {
    vi.useFakeTimers();
    vi.spyOn(console, "log").mockImplementation(() => {});
    const queue = { sendBatch: async () => Promise.reject(new Error("queue refused")) } as unknown as Queue<FireGroup>;
    const sent = withQueueLatency(queue, { medianMs: 10, p99Ms: 10 }).sendBatch([group(0, "x")]);
    const outcome = expect(sent).rejects.toThrow("queue refused");
    await vi.advanceTimersByTimeAsync(10);
    await outcome;
  });
});
