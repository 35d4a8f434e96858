/**
 * A bulk action: cancel, pause or resume many jobs of one tenant, by ids or by a filter, in pages,
 * in the background. One Durable Object per tenant and action id (an Idempotency-Key names the
 * same object, so a repeated request finds the action already running instead of starting a
 * second). Each page runs the same change a single request would (api/job-changes.ts), which is
 * safe to run twice: a job already canceled, paused or resumed answers success again. Progress
 * (matched, done, failed, the first failures) is stored after every page; the alarm takes the next.
 */
import { DurableObject } from "cloudflare:workers";
import { ApiError } from "../api/errors";
import type { ChangeResult, Deps } from "../api/job-changes";
import { cancelJob, pauseJob, resumeJob } from "../api/job-changes";
import { configOf } from "../config";
import type { JobState } from "../core/lifecycle";
import { dbOf, getJob, listJobs } from "../db/queries";
import type { JobRow } from "../db/schema";

export const BULK_KINDS = ["cancel", "pause", "resume"] as const;
export type BulkKind = (typeof BULK_KINDS)[number];

/** Which jobs: these ids, or every job the filter lists (GET /v1/jobs' filters). */
export type Selector = { ids: string[] } | { filter: { status?: JobState; label?: { key: string; value: string } } };

export interface ActionState {
  id: string;
  tenant: string;
  kind: BulkKind;
  selector: Selector;
  status: "running" | "done";
  /** jobs found so far (ids: those that exist) */
  matched: number;
  done: number;
  failed: number;
  /** the first failures, each with the error code a single request would have got */
  failures: { jobId: string; code: string }[];
  createdAt: number;
  finishedAt: number | null;
  /** where the next page starts: an index into ids, or the list's cursor (a job id) */
  next: number | string | null;
}

/** Jobs changed per page (one alarm): each is a D1 write and a request to its bucket. */
export const PAGE = 50;
const KEPT_FAILURES = 20;
const CHANGES: Record<BulkKind, (deps: Deps, job: JobRow) => Promise<ChangeResult>> = {
  cancel: cancelJob,
  pause: pauseJob,
  resume: resumeJob,
};

export function bulkActionName(tenant: string, id: string): string {
  return `${tenant}\n${id}`;
}

export class BulkAction extends DurableObject<Env> {
  /** Starts the action, or answers the one already started under this name (idempotent). */
  async start(init: { id: string; tenant: string; kind: BulkKind; selector: Selector; now: number }): Promise<ActionState> {
    const existing = await this.ctx.storage.get<ActionState>("state");
    if (existing) return existing;
    const state: ActionState = {
      ...init,
      status: "running",
      matched: 0,
      done: 0,
      failed: 0,
      failures: [],
      createdAt: init.now,
      finishedAt: null,
      next: "ids" in init.selector ? 0 : null,
    };
    await this.ctx.storage.put("state", state);
    await this.ctx.storage.setAlarm(init.now);
    return state;
  }

  async view(): Promise<ActionState | null> {
    return (await this.ctx.storage.get<ActionState>("state")) ?? null;
  }

  /** One page; the next is another alarm, so no invocation runs long. */
  override async alarm(): Promise<void> {
    const state = await this.ctx.storage.get<ActionState>("state");
    if (!state || state.status === "done") return;
    const db = dbOf(this.env.DB);
    const page = await this.nextPage(state, db);
    const deps = { env: this.env, db, config: configOf(this.env), tenant: state.tenant };
    for (const { id, job } of page.jobs) {
      if (!job) {
        record(state, id, "not_found");
        continue;
      }
      state.matched += 1;
      try {
        await CHANGES[state.kind]({ ...deps, now: Date.now() }, job);
        state.done += 1;
      } catch (error) {
        if (!(error instanceof ApiError)) console.error(`bulk ${state.kind} of ${id} failed`, error);
        record(state, id, error instanceof ApiError ? error.code : "internal");
      }
    }
    state.next = page.next;
    if (page.next === null) {
      state.status = "done";
      state.finishedAt = Date.now();
    }
    await this.ctx.storage.put("state", state);
    if (state.status === "running") await this.ctx.storage.setAlarm(Date.now());
  }

  private async nextPage(
    state: ActionState,
    db: ReturnType<typeof dbOf>,
  ): Promise<{ jobs: { id: string; job?: JobRow }[]; next: number | string | null }> {
    if ("ids" in state.selector) {
      const from = state.next as number;
      const ids = state.selector.ids.slice(from, from + PAGE);
      const jobs = await Promise.all(ids.map(async (id) => ({ id, job: await getJob(db, state.tenant, id) })));
      return { jobs, next: from + PAGE < state.selector.ids.length ? from + PAGE : null };
    }
    const cursor = typeof state.next === "string" ? state.next : undefined;
    const rows = await listJobs(db, state.tenant, state.selector.filter, cursor, PAGE + 1);
    const jobs = rows.slice(0, PAGE).map((job) => ({ id: job.id, job }));
    return { jobs, next: rows.length > PAGE ? jobs[jobs.length - 1]!.id : null };
  }
}

function record(state: ActionState, jobId: string, code: string): void {
  state.failed += 1;
  if (state.failures.length < KEPT_FAILURES) state.failures.push({ jobId, code });
}
