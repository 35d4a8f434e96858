/**
 * The operator's console (public/console, README "Console") in Chromium against the real local
 * stack: sign-in (also by keyboard only), a job waiting and then firing on its page with its
 * attempt timeline, the link to all its executions, the edit form and cancel, the keyboard focus
 * kept across the job page's and the live view's refreshes, a dead letter redriven in bulk from
 * the DLQ view with the action's progress, the live lag chart drawn from successive metrics reads
 * and the totals equal to GET /v1/metrics, a malformed address, a 360 px wide screen
 * without horizontal scroll, a 401 back to sign-in, and the API's paths still answered by the
 * Worker. Prints the console's first-load weight and time to first render. Screenshots go to
 * .wrangler/test-logs/console/ (UPDATE_DOCS_SCREENSHOTS=1 also copies two to docs/).
 *
 * Chromium is Debian's (/usr/bin/chromium; .ci/run installs it), driven by playwright-core.
 */
// the page.evaluate callbacks run in the browser: they are typed against the DOM
/// <reference lib="dom" />
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { type AttemptView, type ExecutionView, eventually, report, settledExecution, stackForFile } from "./harness.js";

const PORT = 18910;
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const SHOTS = fileURLToPath(new URL("../../.wrangler/test-logs/console", import.meta.url));
const DOCS = fileURLToPath(new URL("../../docs", import.meta.url));
/** the longest any one browser wait may take: a job fires within seconds on the local stack */
const UI_WAIT_MS = 30_000;

const local = stackForFile({
  port: PORT,
  routes: { "/console-ok": { kind: "ok" }, "/console-down": { kind: "always", status: 400 } },
});
const { receiver, sink } = local;

let context: BrowserContext;
let profile: string;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), "console-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    // the machine has no network: without these Chromium keeps trying to reach Google's services
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      // /dev/shm is small in containers: Chromium's shared memory goes to /tmp instead
      "--disable-dev-shm-usage",
    ],
    viewport: { width: 1200, height: 900 },
    timeout: 60_000,
  });
  context.setDefaultTimeout(UI_WAIT_MS);
});

afterAll(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

const consoleUrl = () => `${local.stack.url}/console/`;

async function shot(page: Page, name: string, docsName?: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  if (docsName && process.env.UPDATE_DOCS_SCREENSHOTS === "1") copyFileSync(path, join(DOCS, docsName));
}

async function signIn(page: Page): Promise<void> {
  await page.goto(consoleUrl());
  await page.getByLabel("API key").fill(local.creds.apiKey);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { level: 1, name: "Jobs" }).waitFor();
}

/** The focused element's accessible name as the tests use it: its aria-label, else its text. */
function focusedName(page: Page): Promise<string> {
  return page.evaluate(() => {
    const active = document.activeElement;
    if (!active || active === document.body) return "<body>";
    return active.getAttribute("aria-label") || active.textContent?.trim() || "";
  });
}

/**
 * Tabs (at most `limit` times) until the control named `name` has the focus; then waits past a
 * refresh (a view redraws every 2 s) and answers whether the focus is still on a control of that
 * name and whether that control is a new element (the refresh really redrew it).
 */
async function focusSurvivesRefresh(page: Page, name: string, limit = 8): Promise<{ name: string; redrawn: boolean }> {
  for (let i = 0; i < limit && (await focusedName(page)) !== name; i++) await page.keyboard.press("Tab");
  expect(await focusedName(page)).toBe(name);
  await page.evaluate(() => {
    (window as unknown as { focusedBefore: Element | null }).focusedBefore = document.activeElement;
  });
  await page.waitForTimeout(2_600);
  const redrawn = await page.evaluate(
    () => document.activeElement !== (window as unknown as { focusedBefore: Element | null }).focusedBefore,
  );
  return { name: await focusedName(page), redrawn };
}

/**
 * The page's script errors and every failed request outside the API: a console bug shows as what
 * the browser said. API refusals (a 400 the edit form shows, the 401 of a wrong key) are the
 * console's to show, so only their "Failed to load resource" log lines are let through.
 */
function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(`pageerror: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) errors.push(`console: ${message.text()}`);
  });
  page.on("requestfailed", (request) => errors.push(`request failed: ${request.url()} ${request.failure()?.errorText}`));
  page.on("response", (response) => {
    if (response.status() >= 400 && !new URL(response.url()).pathname.startsWith("/v1/"))
      errors.push(`${response.status()}: ${response.url()}`);
  });
  onTestFailed(() => console.error(errors.join("\n"), sink.text().slice(-3000)));
  return errors;
}

describe("the operator's console in Chromium", () => {
  it("loads small and fast, signs in, and shows a job firing on its page with its attempt timeline", async () => {
    const page = await context.newPage();
    const errors = watchErrors(page);

    // the first load, with an empty cache: what it transfers and when it first renders
    await page.goto(consoleUrl());
    await page.getByLabel("API key").waitFor();
    const load = await page.evaluate(() => {
      const navigation = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
      const resources = performance.getEntriesByType("resource") as PerformanceResourceTiming[];
      const paint = performance.getEntriesByType("paint").find((e) => e.name === "first-contentful-paint");
      const ready = performance.getEntriesByName("console-ready")[0];
      return {
        files: [navigation, ...resources].map((e) => ({ url: e.name, transfer: e.transferSize, body: e.decodedBodySize })),
        fcpMs: paint ? Math.round(paint.startTime) : null,
        readyMs: ready ? Math.round(ready.startTime) : null,
      };
    });
    // what the same files weigh gzipped (the local stack sends them uncompressed; Cloudflare compresses)
    let gzipBytes = 0;
    const encodings = new Set<string>();
    for (const file of load.files) {
      const res = await fetch(file.url, { headers: { "accept-encoding": "gzip" } });
      encodings.add(res.headers.get("content-encoding") ?? "identity");
      const body = new Uint8Array(await res.arrayBuffer());
      expect(body.byteLength, file.url).toBe(file.body);
      gzipBytes += gzipSync(body, { level: 9 }).byteLength;
    }
    const figures = {
      requests: load.files.length,
      transferredBytes: load.files.reduce((sum, f) => sum + f.transfer, 0),
      rawBytes: load.files.reduce((sum, f) => sum + f.body, 0),
      gzipBytes,
      servedEncodings: [...encodings],
      firstContentfulPaintMs: load.fcpMs,
      signInDrawnMs: load.readyMs,
    };
    report("console-first-load", figures);
    expect(load.files.every((f) => new URL(f.url).origin === new URL(local.stack.url).origin)).toBe(true);
    expect(figures.rawBytes).toBeLessThan(100_000);
    expect(load.fcpMs).not.toBeNull();

    await page.getByLabel("API key").fill(local.creds.apiKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { level: 1, name: "Jobs" }).waitFor();
    // the key is in this tab's sessionStorage only: no cookie, not in the URL
    expect(await page.evaluate(() => document.cookie)).toBe("");
    expect(page.url()).not.toContain(local.creds.apiKey);

    const waiting = await local.api.createJob({
      name: "console-waits",
      target: { url: `${receiver.url}/console-ok` },
      delay: "1h",
      labels: { suite: "console", kind: "later" },
    });
    expect(waiting.status).toBe(201);
    // due in 4 s: time to open its page and see it waiting before it fires; created inside a W3C trace
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const fired = await local.api.createJob(
      {
        name: "console-fires",
        target: { url: `${receiver.url}/console-ok`, body: { from: "console test" } },
        delay: "4s",
        labels: { suite: "console" },
      },
      { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    );
    expect(fired.status).toBe(201);
    const firesAt = Date.parse(fired.body.nextRunAt ?? "");

    // the id search opens the job's page: waiting first, then it fires, and the attempt shows on its timeline
    await page.getByLabel("Job id").fill(fired.body.id);
    await page.getByLabel("Job id").press("Enter");
    await page.getByRole("heading", { level: 1, name: "console-fires" }).waitFor();
    const before = await page.locator(".execution").first().getAttribute("data-status");
    expect(Date.now(), "the page opened before the job was due").toBeLessThan(firesAt);
    expect(["pending", "scheduled"]).toContain(before);
    expect(receiver.to("/console-ok")).toHaveLength(0);
    await page.locator('.execution[data-status="succeeded"] .attempt[data-outcome="succeeded"]').waitFor({ timeout: UI_WAIT_MS });
    const attempt = (await page.locator(".attempt").first().textContent()) ?? "";
    expect(attempt).toContain("#1 succeeded");
    expect(attempt).toContain("HTTP 200");
    expect(attempt).toMatch(/lag \d/);
    expect(await page.locator(".execution svg.timeline rect.outcome-succeeded").count()).toBe(1);
    expect(receiver.to("/console-ok")).toHaveLength(1);
    // the response's excerpt, when the API gives one, is shown as text labelled "response"
    const settled = (await settledExecution(local.api, fired.body.id, "succeeded", 1, UI_WAIT_MS)) as unknown as ExecutionView<
      (AttemptView & { responseExcerpt?: string | null })[]
    >;
    const excerpt = settled.attempts[0]?.responseExcerpt;
    if (typeof excerpt === "string" && excerpt !== "") {
      await expect
        .poll(() => page.locator(".attempt .excerpt.response").first().textContent(), { timeout: UI_WAIT_MS })
        .toBe(`response ${excerpt}`);
    } else expect(await page.locator(".attempt .excerpt.response").count()).toBe(0);
    // the job's trace id, and the attempt's span in it
    expect(await page.locator("[data-trace]").textContent()).toBe(traceId);
    expect(settled.attempts[0]?.spanId).toMatch(/^[0-9a-f]{16}$/);
    await expect
      .poll(() => page.locator(".attempt [data-span]").first().textContent(), { timeout: UI_WAIT_MS })
      .toBe(settled.attempts[0]?.spanId);
    await shot(page, "job", "console-job.png");

    // every execution of the job, past the 100 of its own page: the executions view, filtered by job
    const executionId = (await page.locator(".execution").first().getAttribute("data-execution")) ?? "";
    await page.getByRole("link", { name: "All executions of this job" }).click();
    await page.getByRole("heading", { level: 1, name: "Executions" }).waitFor();
    expect(new URL(page.url()).hash).toBe(`#/executions?jobId=${fired.body.id}`);
    await expect.poll(() => page.locator("tbody").textContent(), { timeout: UI_WAIT_MS }).toContain(executionId);

    // the list, filtered by label and by name
    await page.getByRole("link", { name: "Jobs" }).click();
    await page.getByRole("heading", { level: 1, name: "Jobs" }).waitFor();
    await page.getByLabel("Label").fill("suite:console");
    await page.getByLabel("Name starts with").fill("console-f");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("link", { name: "console-fires" }).waitFor();
    expect(await page.getByRole("link", { name: "console-waits" }).count()).toBe(0);

    // a recurring job's Pause keeps the keyboard focus across the page's refresh; pressed, the
    // focus moves to Resume (Pause is disabled then), again across a refresh
    const recurring = await local.api.createJob({
      name: "console-recurs",
      target: { url: `${receiver.url}/console-ok` },
      cron: "0 0 1 1 *",
      labels: { suite: "console-cron" },
    });
    expect(recurring.status).toBe(201);
    await page.goto(`${consoleUrl()}#/jobs/${recurring.body.id}`);
    await page.getByRole("heading", { level: 1, name: "console-recurs" }).focus();
    expect(await focusSurvivesRefresh(page, "Pause")).toEqual({ name: "Pause", redrawn: true });
    await page.keyboard.press("Enter");
    await page.getByText("Pause: the job is paused.").waitFor();
    await expect.poll(() => focusedName(page), { timeout: UI_WAIT_MS }).toBe("Resume");
    expect(await focusSurvivesRefresh(page, "Resume")).toEqual({ name: "Resume", redrawn: true });
    expect((await local.api.job(recurring.body.id)).body.status).toBe("paused");
    expect((await local.api.request("DELETE", `/v1/jobs/${recurring.body.id}`)).status).toBe(200);

    // the edit form PATCHes what changed; an invalid value is shown with its field
    await page.goto(`${consoleUrl()}#/jobs/${waiting.body.id}`);
    await page.getByRole("heading", { level: 1, name: "console-waits" }).waitFor();
    await page.getByLabel("Or delay").fill("soon");
    await page.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => page.getByRole("alert").textContent(), { timeout: UI_WAIT_MS }).toContain("(field delay)");
    await page.getByLabel("Or delay").fill("2h");
    await page.getByLabel("Name").fill("console-renamed");
    await page.getByLabel("Labels").fill("suite:console, kind:edited");
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved: name, labels, delay.").waitFor();
    const edited = (await local.api.job(waiting.body.id)).body as unknown as { name: string; labels: unknown; nextRunAt: string };
    expect(edited.name).toBe("console-renamed");
    expect(edited.labels).toEqual({ suite: "console", kind: "edited" });
    expect(Date.parse(edited.nextRunAt) - Date.now()).toBeGreaterThan(90 * 60_000);

    // cancel; pause and resume are for recurring jobs only
    expect(await page.getByRole("button", { name: "Pause" }).isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Cancel job" }).click();
    await page.getByText("Cancel job: the job is canceled.").waitFor();
    expect((await local.api.job(waiting.body.id)).body.status).toBe("canceled");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("shows a job's priority on its page and changes it with the edit form (issue 29)", async () => {
    const page = await context.newPage();
    const errors = watchErrors(page);
    const res = await local.api.createJob({
      name: "console-urgent",
      target: { url: `${receiver.url}/console-ok` },
      delay: "1h",
      priority: 9,
    });
    expect(res.status).toBe(201);
    await signIn(page);
    await page.goto(`${consoleUrl()}#/jobs/${res.body.id}`);
    await page.getByRole("heading", { level: 1, name: "console-urgent" }).waitFor();
    const shown = page.locator("dl.facts dt", { hasText: /^priority$/ }).locator("xpath=following-sibling::dd[1]");
    expect(await shown.textContent()).toBe("9");
    await page.getByLabel("Priority").fill("12");
    await page.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => page.getByRole("alert").textContent(), { timeout: UI_WAIT_MS }).toContain("(field priority)");
    await page.getByLabel("Priority").fill("2");
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved: priority.").waitFor();
    expect(((await local.api.job(res.body.id)).body as unknown as { priority: number }).priority).toBe(2);
    await expect.poll(() => shown.textContent(), { timeout: UI_WAIT_MS }).toBe("2");
    expect((await local.api.request("DELETE", `/v1/jobs/${res.body.id}`)).status).toBe(200);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("bulk-redrives a dead letter from the DLQ view and follows the action until it is done", async () => {
    const page = await context.newPage();
    const errors = watchErrors(page);
    const res = await local.api.createJob({
      name: "console-dies",
      target: { url: `${receiver.url}/console-down` },
      retry: { maxAttempts: 1 },
    });
    expect(res.status).toBe(201);
    const dead = await settledExecution(local.api, res.body.id, "dead", 1, UI_WAIT_MS);
    expect(dead.deadReason).toBe("permanent");
    await eventually(
      "the dead execution is listed in GET /v1/dlq",
      async () =>
        (await local.api.request<{ executions: ExecutionView[] }>("GET", "/v1/dlq")).body.executions.some((e) => e.id === dead.id),
      UI_WAIT_MS,
      200,
    );

    const alertUrl = `${receiver.url}/console-alerts`;
    const put = await local.api.request("PUT", "/v1/alerts", { url: alertUrl, headers: { "x-token": "secret" }, throttledForMs: 120_000 });
    expect(put.status).toBe(200);

    await signIn(page);
    await page.getByRole("link", { name: "Dead letters" }).click();
    await page.getByRole("heading", { level: 1, name: "Dead letters" }).waitFor();
    // the tenant's alert target, read-only: its URL, its header names (never their values), its throttle threshold
    const alerts = page.locator('dl[data-alerts="set"]');
    await expect.poll(() => alerts.textContent(), { timeout: UI_WAIT_MS }).toContain(alertUrl);
    expect(await alerts.textContent()).toContain("x-token");
    expect(await alerts.textContent()).not.toContain("secret");
    expect(await alerts.textContent()).toContain("throttled longer than 2.0 min");
    expect((await local.api.request("DELETE", "/v1/alerts")).status).toBe(204);
    const row = page.locator(`tr[data-execution="${dead.id}"]`);
    await expect.poll(() => row.textContent(), { timeout: UI_WAIT_MS }).toContain("400");
    await shot(page, "dlq-before");
    await page.getByLabel(`Select ${dead.id}`).check();
    await page.getByRole("button", { name: "Redrive selected" }).click();
    await page.locator('.counts[data-status="done"]').waitFor();
    expect(await page.locator(".counts").textContent()).toBe("Done: matched 1, done 1, failed 0.");
    expect(await page.locator("progress").getAttribute("value")).toBe("1");
    await shot(page, "dlq", "console-dlq.png");

    // the redrive really ran it again: attempt 2 of the same execution reached the target
    const again = await eventually("the redriven attempt reaches the target", () => receiver.byWebhookId(dead.id)[1], UI_WAIT_MS);
    expect(again.attempt).toBe(2);

    // the executions view finds it by its job and its last HTTP status
    await page.getByRole("link", { name: "Executions" }).click();
    await page.getByLabel("Job id").fill(res.body.id);
    await page.getByLabel("HTTP status").fill("400");
    await page.getByRole("button", { name: "Filter" }).click();
    await expect.poll(() => page.locator("tbody").textContent(), { timeout: UI_WAIT_MS }).toContain(dead.id);
    expect(page.url()).toContain("httpStatus=400");

    // an address that cannot be decoded shows the jobs, saying so (no script error)
    await page.goto(`${consoleUrl()}#/jobs/%E0`);
    await page.getByRole("heading", { level: 1, name: "Jobs" }).waitFor();
    await expect.poll(() => page.getByRole("alert").textContent(), { timeout: UI_WAIT_MS }).toContain("could not be read");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("plots the live lag chart from successive metrics reads, and shows the counters", async () => {
    const page = await context.newPage();
    const errors = watchErrors(page);
    await signIn(page);
    await page.getByRole("link", { name: "Live" }).click();
    const lagChart = page.locator("svg.chart").first();
    await lagChart.waitFor();
    // attempts in every 2 s read interval for 8 s: one a second, so consecutive points have a p50
    const created = await local.api.createJobs(
      Array.from({ length: 8 }, (_, i) => ({ target: { url: `${receiver.url}/console-ok` }, delay: `${i + 1}s` })),
    );
    for (const job of created) await settledExecution(local.api, job.id, "succeeded", 1, UI_WAIT_MS);
    // the p50 line joins at least two points (an L after the M: not the empty series' "M0,0"),
    // each a drawn point, and the data table has a p50 that is a number
    await expect
      .poll(() => lagChart.locator("path.s1").getAttribute("d"), { timeout: UI_WAIT_MS })
      .toMatch(/M\d[\d.]*,[\d.]+L\d[\d.]*,[\d.]+/);
    expect(await lagChart.locator("circle.s1").count()).toBeGreaterThanOrEqual(2);
    const p50s = await page.locator("figure").first().locator("tbody tr td:first-of-type").allTextContents();
    expect(p50s).toContainEqual(expect.stringMatching(/^\d+(\.\d)? m?s$/));

    // the totals are what GET /v1/metrics says: the API and the view read until both agree (the
    // view reads every 2 s; nothing runs now, so they must), with the dead letter of the DLQ test
    // and its redrive among them
    const shown = () =>
      page.evaluate(() =>
        Object.fromEntries(
          Array.from(document.querySelectorAll("tr[data-counter]"), (row) => [
            row.getAttribute("data-counter"),
            Number(row.querySelector("td")?.textContent),
          ]),
        ),
      );
    const expected = async () => {
      const metrics = (await local.api.metrics()).body;
      const dead = Object.entries(metrics.dead_total_by_reason);
      return Object.fromEntries([
        ...Object.keys(await shown())
          .filter((name) => !name.startsWith("dead_total:"))
          .map((name) => [name, metrics.counters[name] ?? 0]),
        ...(dead.length ? dead : [["any reason", 0]]).map(([reason, n]) => [`dead_total:${reason}`, n]),
      ]);
    };
    // the DLQ test's dead letter (its redrive died again) is counted by the API first
    await eventually(
      "GET /v1/metrics counts the DLQ test's dead letter",
      async () => ((await local.api.metrics()).body.dead_total_by_reason.permanent ?? 0) >= 1,
      UI_WAIT_MS,
      500,
    ).catch(async (error) => {
      throw new Error(`${error}; GET /v1/metrics: ${JSON.stringify((await local.api.metrics()).body)}`);
    });
    const sorted = (counts: Record<string, unknown>) => JSON.stringify(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
    let agreed: Record<string, number> = {};
    await eventually(
      "the counters shown equal GET /v1/metrics",
      async () => {
        const [api, view] = [await expected(), await shown()];
        agreed = view;
        return sorted(api) === sorted(view);
      },
      UI_WAIT_MS,
      500,
    );
    expect(agreed["dead_total:permanent"]).toBeGreaterThanOrEqual(1);
    expect(agreed.redrive_total).toBeGreaterThanOrEqual(1);
    expect(agreed.succeeded_total).toBeGreaterThanOrEqual(8);
    expect(Object.keys(agreed)).toEqual(expect.arrayContaining(["stale_lease_rejects_total", "duplicates_suppressed_total"]));

    // the counters' scrolling region keeps the keyboard focus across the view's redraw
    await page.getByRole("heading", { level: 1, name: "Live" }).focus();
    expect(await focusSurvivesRefresh(page, "Counters")).toEqual({ name: "Counters", redrawn: true });
    await shot(page, "live");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("signs in with the keyboard only, focus visible at each step", async () => {
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(consoleUrl());
    await page.getByLabel("API key").waitFor();
    const focused = () => page.evaluate(() => document.activeElement?.id || document.activeElement?.textContent?.trim() || "");
    // start from the top of the page, as someone arriving by keyboard does
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    for (let i = 0; i < 5 && (await focused()) !== "api-key"; i++) await page.keyboard.press("Tab");
    expect(await focused()).toBe("api-key");
    await page.keyboard.type(local.creds.apiKey);
    await page.keyboard.press("Tab");
    expect(await focused()).toBe("Sign in");
    const outline = await page.evaluate(() => getComputedStyle(document.activeElement as Element).outlineStyle);
    expect(outline).not.toBe("none");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { level: 1, name: "Jobs" }).waitFor();
    // on to another view by keyboard: focus is on the view's heading, the nav links just before it
    await expect.poll(focused, { timeout: UI_WAIT_MS }).toBe("Jobs");
    for (let i = 0; i < 5 && (await focused()) !== "Dead letters"; i++) await page.keyboard.press("Shift+Tab");
    expect(await focused()).toBe("Dead letters");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { level: 1, name: "Dead letters" }).waitFor();
    expect(errors).toEqual([]);
    await page.close();
  });

  it("fits a 360 px wide screen: no view scrolls sideways", async () => {
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.setViewportSize({ width: 360, height: 740 });
    await page.goto(consoleUrl());
    await page.getByLabel("API key").waitFor();
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(await overflow()).toBe(0);
    await signIn(page);
    const job = (await local.api.request<{ jobs: { id: string }[] }>("GET", "/v1/jobs?label=suite:console")).body.jobs[0]!;
    for (const [route, heading] of [
      ["#/jobs", "Jobs"],
      [`#/jobs/${job.id}`, null],
      ["#/executions", "Executions"],
      ["#/dlq", "Dead letters"],
      ["#/live", "Live"],
    ] as const) {
      await page.goto(`${consoleUrl()}${route}`);
      if (heading) await page.getByRole("heading", { level: 1, name: heading }).waitFor();
      else await page.locator(".execution").first().waitFor();
      await page.waitForLoadState("networkidle");
      // on failure, the message names the elements that reach past the screen's right edge
      const wide = () =>
        page.evaluate(() =>
          Array.from(document.querySelectorAll("body *"))
            .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
            .slice(0, 5)
            .map((e) => `${e.tagName.toLowerCase()}.${e.getAttribute("class") ?? ""} ${Math.round(e.getBoundingClientRect().right)}`)
            .join("; "),
        );
      if ((await overflow()) !== 0) await shot(page, `narrow-overflow-${route.slice(2).split("/")[0]}`);
      expect(await overflow(), `${route}: ${await wide()}`).toBe(0);
      await shot(page, `narrow-${route.slice(2).split("/")[0]}${heading ? "" : "-page"}`);
    }
    expect(errors).toEqual([]);
    await page.close();
  });

  it("sends a refused key back to sign-in, saying why", async () => {
    const page = await context.newPage();
    await page.goto(consoleUrl());
    await page.getByLabel("API key").fill("not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent(), { timeout: UI_WAIT_MS }).toContain("401");
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.close();
  });

  it("serves the console from static assets while every API path stays the Worker's", async () => {
    const base = local.stack.url;
    const html = await fetch(`${base}/console/`);
    expect(html.status).toBe(200);
    expect(html.headers.get("content-type")).toContain("text/html");
    expect(html.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect((await fetch(`${base}/console`, { redirect: "manual" })).headers.get("location")).toMatch(/\/console\/$/);
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ ok: true });
    expect(((await (await fetch(`${base}/openapi.json`)).json()) as { openapi: string }).openapi).toMatch(/^3\.1/);
    const unauthorized = await fetch(`${base}/v1/jobs`);
    expect(unauthorized.status).toBe(401);
    expect(((await unauthorized.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const missing = await fetch(`${base}/no-such-page`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("not_found");
    // the assets' header rules are not themselves served
    expect((await fetch(`${base}/_headers`)).status).toBe(404);
  });
});
