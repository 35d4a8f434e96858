/**
 * A bulk action: cancel, pause or resume many jobs of one tenant, or redrive many of its dead
 * executions, by ids or by a filter, in pages, in the background. One Durable Object per tenant and action id (an Idempotency-Key names the
 * same object, so a repeated request finds the action already running instead of starting a
 * second). Each page runs the same change a single request would (use-cases/job-changes.ts), on the job
 * as D1 holds it when its turn comes (as the request reads it), which is safe to run twice: a job
 * already canceled, paused or resumed answers success again, and an execution already redriven is
 * no longer dead (counted as refused, not_found: nothing runs twice). Progress
 * (matched, done, failed, the first failures) is stored after every page; the alarm takes the next.
 */
import { DurableObject } from "cloudflare:workers";
import { configOf } from "../config";
import type { JobState } from "../core/lifecycle";
import type { JobRow } from "../db/schema";
import { shardOfOrNull, shardsOf } from "../db/shards";
import { ApiError } from "../use-cases/errors";
import type { ChangeResult, Deps } from "../use-cases/job-changes";
import { cancelJob, pauseJob, redriveExecution, resumeJob } from "../use-cases/job-changes";
import { decodeCursor, encodeCursor } from "../use-cases/present";
import { jobOf, listDeadPage, listJobsPage } from "../use-cases/read-model";

/** Changes of jobs (POST /v1/jobs/<kind>). */
export const BULK_JOB_KINDS = ["cancel", "pause", "resume"] as const;
export type BulkKind = (typeof BULK_JOB_KINDS)[number] | "redrive";

export interface JobFilter {
  status?: JobState;
  label?: { key: string; value: string };
}

export interface DeadFilter {
  jobId?: string;
  deadReason?: string;
}

/** Which jobs or dead executions: these ids, every job GET /v1/jobs lists with `filter`, or every dead execution of `dead`. */
export type Selector = { ids: string[] } | { filter: JobFilter } | { dead: DeadFilter };

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
  failures: { id: string; code: string }[];
  createdAt: number;
  finishedAt: number | null;
  /** where the next page starts: an index into ids, or the list's cursor (a job id; "deadAt:id" in the dead letters) */
  next: number | string | null;
}

/** Jobs changed per page (one alarm): each is a D1 read and write and a request to its bucket. */
export const PAGE = 50;
const KEPT_FAILURES = 20;
const JOB_CHANGES: Record<(typeof BULK_JOB_KINDS)[number], (deps: Deps, job: JobRow) => Promise<ChangeResult>> = {
  cancel: cancelJob,
  pause: pauseJob,
  resume: resumeJob,
};

export function bulkActionName(tenant: string, id: string): string {
  return `${tenant}\n${id}`;
}

/** How long a finished action stays readable (GET /v1/actions/:id), then its object deletes itself. */
export const ACTION_RETENTION_MS = 7 * 86_400_000;

export class BulkAction extends DurableObject<Env> {
  /**
   * Starts the action, or answers the one already started under this name (idempotent): the same
   * Idempotency-Key with another kind or selection is `reused` (the route answers 409).
   */
  async start(init: {
    id: string;
    tenant: string;
    kind: BulkKind;
    selector: Selector;
    now: number;
  }): Promise<{ state: ActionState; reused: boolean }> {
    const existing = await this.view();
    if (existing) {
      const same = existing.kind === init.kind && JSON.stringify(existing.selector) === JSON.stringify(init.selector);
      return { state: existing, reused: !same };
    }
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
    return { state, reused: false };
  }

  /** The action; a running one whose alarm the runtime gave up on (after its retries) is armed again. */
  async view(): Promise<ActionState | null> {
    const state = (await this.ctx.storage.get<ActionState>("state")) ?? null;
    if (state?.status === "running" && (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now());
    return state;
  }

  /**
   * One page; the next is another alarm, so no invocation runs long. A refusal (an ApiError) is
   * counted for its job and the page goes on; any other failure (D1 down) stores the progress up
   * to the job before it and throws, so the runtime retries the alarm from that job on.
   */
  override async alarm(): Promise<void> {
    const state = await this.ctx.storage.get<ActionState>("state");
    if (!state) return;
    if (state.status === "done") {
      if (Date.now() >= (state.finishedAt ?? 0) + ACTION_RETENTION_MS) await this.ctx.storage.deleteAll();
      else await this.ctx.storage.setAlarm((state.finishedAt ?? Date.now()) + ACTION_RETENTION_MS);
      return;
    }
    const page = await this.nextPage(state);
    const config = configOf(this.env);
    for (const [i, id] of page.ids.entries()) {
      try {
        // each job's change on its own shard (an id naming none is no job of this tenant's)
        const shard = await shardOfOrNull(shardsOf(this.env), id);
        if (!shard) throw new ApiError("not_found", "job not found", "id");
        await this.change(state, { env: this.env, db: shard.db, config, tenant: state.tenant, now: Date.now() }, id);
        state.matched += 1;
        state.done += 1;
      } catch (error) {
        if (!(error instanceof ApiError)) {
          state.next = page.resumeAt(i);
          await this.ctx.storage.put("state", state);
          throw error;
        }
        if (error.code !== "not_found") state.matched += 1;
        record(state, id, error.code);
      }
    }
    state.next = page.next;
    if (page.next === null) {
      state.status = "done";
      state.finishedAt = Date.now();
    }
    await this.ctx.storage.put("state", state);
    await this.ctx.storage.setAlarm(state.status === "running" ? Date.now() : state.finishedAt! + ACTION_RETENTION_MS);
  }

  /** One job's change, or one dead execution's redrive, as its single request would run it; throws its refusal. */
  private async change(state: ActionState, deps: Deps, id: string): Promise<void> {
    // a redrive of no dead execution by this id (or of one redriven already): not_found
    if (state.kind === "redrive") await redriveExecution(deps, id, async () => false);
    else {
      // read now, not with the page: the change checks the job's state (the job table), and a
      // job's bucket completes it without raising its version, so the version-guarded write
      // cannot tell a job that completed since the page was read (issue 36 item 5)
      const job = await jobOf(this.env, state.tenant, id);
      if (!job) throw new ApiError("not_found", "job not found", "id");
      await JOB_CHANGES[state.kind](deps, job);
    }
  }

  /**
   * The ids of the next page, where the one after starts (null: this is the last), and where to
   * start again from its i-th id (a failure there).
   */
  private async nextPage(state: ActionState): Promise<{
    ids: string[];
    next: number | string | null;
    resumeAt: (i: number) => number | string | null;
  }> {
    const { selector } = state;
    if ("ids" in selector) {
      const from = state.next as number;
      const next = from + PAGE < selector.ids.length ? from + PAGE : null;
      return { ids: selector.ids.slice(from, from + PAGE), next, resumeAt: (i) => from + i };
    }
    if ("dead" in selector) {
      const at = typeof state.next === "string" ? decodeCursor(state.next) : null;
      const cursor = at ? { deadAt: at.at, id: at.id } : undefined;
      // one already on its way back (redriven, not yet cleared) is not dead any more
      const { page, more } = await listDeadPage(this.env, state.tenant, cursor, PAGE, { ...selector.dead, redriving: false });
      const after = (d: { deadAt: number; executionId: string } | undefined) => (d ? encodeCursor(d.deadAt, d.executionId) : null);
      return {
        ids: page.map((d) => d.executionId),
        next: more ? after(page[page.length - 1]) : null,
        resumeAt: (i) => (i > 0 ? after(page[i - 1]) : state.next),
      };
    }
    const cursor = typeof state.next === "string" ? state.next : undefined;
    // a page may be short (the list's scan budget): its next still goes on
    const { page, next } = await listJobsPage(this.env, state.tenant, selector.filter, cursor, PAGE);
    return {
      ids: page.map((job) => job.id),
      next,
      resumeAt: (i) => (i > 0 ? page[i - 1]!.id : state.next),
    };
  }
}

function record(state: ActionState, id: string, code: string): void {
  state.failed += 1;
  if (state.failures.length < KEPT_FAILURES) state.failures.push({ id, code });
}
