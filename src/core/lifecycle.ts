/**
 * The execution and job lifecycles (DESIGN.md "Execution lifecycle", revision 2): one table each.
 * Every state change goes through `transition` / `jobTransition`; the bucket and the API call
 * them instead of deciding states in ifs, and the storage CHECKs are tested against the lists.
 *
 * Where states live (revision 2, "one writer per fact"):
 * - pending: D1 only (the job is active, its bucket does not hold it yet);
 * - scheduled: a durable row in the job's bucket;
 * - dispatched, running: the bucket's memory, fenced by its epoch (a restart makes them
 *   scheduled again: a duplicate delivery, never a loss);
 * - succeeded, dead, canceled: written once to D1 when terminal, then the bucket row leaves.
 */
export const EXECUTION_STATES = ["pending", "scheduled", "dispatched", "running", "succeeded", "dead", "canceled"] as const;
export type ExecutionState = (typeof EXECUTION_STATES)[number];

export const TERMINAL_STATES = ["succeeded", "dead", "canceled"] as const satisfies readonly ExecutionState[];
export type TerminalState = (typeof TERMINAL_STATES)[number];

export const TRANSITIONS = {
  /** the job's bucket takes it (create, scanner pull, resume, PATCH) */
  handOff: { from: ["pending"], to: "scheduled" },
  /** alarm at due time sends it to the queue */
  dispatch: { from: ["scheduled"], to: "dispatched" },
  /** a dispatch overtaken by later ones and still unclaimed was lost: send again */
  redispatch: { from: ["dispatched"], to: "dispatched" },
  /** the queue refused the send: scheduled again (it was never fired) */
  unsend: { from: ["dispatched"], to: "scheduled" },
  /**
   * a claim for a pull target: it waits in its pull queue for a worker, still dispatched (out of the
   * dispatch order: nothing is re-sent); from dispatched also when its message is claimed again
   */
  offer: { from: ["scheduled", "dispatched"], to: "dispatched" },
  /** a consumer or pull worker takes a lease; from scheduled when a message of an earlier epoch arrives for a due row */
  claim: { from: ["scheduled", "dispatched"], to: "running" },
  /** the target answered 2xx */
  succeed: { from: ["running"], to: "succeeded" },
  /** retryable failure or lease expiry with attempts left: back off */
  retry: { from: ["running"], to: "scheduled" },
  /** flow control held the attempt back: due again later, no attempt used */
  wait: { from: ["running"], to: "scheduled" },
  /** permanent failure or attempts exhausted */
  kill: { from: ["running"], to: "dead" },
  /** the queue gave up on a message (poison): only an execution not under a lease */
  poison: { from: ["scheduled", "dispatched"], to: "dead" },
  /** the job was canceled or paused: nothing new fires */
  cancel: { from: ["pending", "scheduled", "dispatched"], to: "canceled" },
  /** an attempt of a canceled or paused job failed: it is not retried */
  abandon: { from: ["running"], to: "canceled" },
  /** the bucket restarted (new epoch): what was in its memory is eligible again */
  restart: { from: ["dispatched", "running"], to: "scheduled" },
  /** a one-off job's run time changed (PATCH): a running attempt finishes first */
  reschedule: { from: ["scheduled", "dispatched", "running"], to: "scheduled" },
  /** dead -> scheduled with a fresh attempt budget */
  redrive: { from: ["dead"], to: "scheduled" },
  /** resume schedules an occurrence that the pause canceled */
  reopen: { from: ["canceled"], to: "scheduled" },
} as const satisfies Record<string, { from: readonly ExecutionState[]; to: ExecutionState }>;

export type Transition = keyof typeof TRANSITIONS;

export function isTerminal(state: ExecutionState): state is TerminalState {
  return (TERMINAL_STATES as readonly string[]).includes(state);
}

export function canApply(transition: Transition, from: ExecutionState): boolean {
  return (TRANSITIONS[transition].from as readonly string[]).includes(from);
}

/** The state after `event`, or null when the table does not allow it from `from`. */
export function transition<T extends Transition>(from: ExecutionState, event: T): (typeof TRANSITIONS)[T]["to"] | null {
  return canApply(event, from) ? TRANSITIONS[event].to : null;
}

/** The CHECK constraint of a column holding execution states (the bucket's SQLite; D1's comes from the drizzle schema). */
export function statusCheckSql(column = "status"): string {
  return `CHECK (${column} IN (${EXECUTION_STATES.map((s) => `'${s}'`).join(",")}))`;
}

// ---------------------------------------------------------------------------------------------
// jobs

export const JOB_STATES = ["active", "paused", "canceled", "completed"] as const;
export type JobState = (typeof JOB_STATES)[number];

/**
 * User changes (the API, each raising the job's version) and the one change the bucket makes
 * (complete). `to: null` keeps the state.
 */
export const JOB_TRANSITIONS = {
  cancel: { from: ["active", "paused"], to: "canceled" },
  pause: { from: ["active"], to: "paused" },
  resume: { from: ["paused"], to: "active" },
  patch: { from: ["active", "paused"], to: null },
  /** a dead execution gets a new budget; a one-off job that ended with it is active again */
  redrive: { from: ["active", "paused", "completed"], to: null },
  /** the bucket: the job's last (or only) execution ended succeeded or dead */
  complete: { from: ["active"], to: "completed" },
} as const satisfies Record<string, { from: readonly JobState[]; to: JobState | null }>;

export type JobTransition = keyof typeof JOB_TRANSITIONS;

/** The job state after `event`, or null when the table does not allow it. */
export function jobTransition(from: JobState, event: JobTransition): JobState | null {
  const t = JOB_TRANSITIONS[event];
  if (!(t.from as readonly string[]).includes(from)) return null;
  return t.to ?? from;
}
