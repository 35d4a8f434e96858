/**
 * The execution lifecycle (DESIGN.md, "Execution lifecycle"): every state change in the
 * bucket and in D1 goes through TRANSITIONS; SQL guards are derived from it (fromStatesSql).
 */
export const EXECUTION_STATES = [
  "pending", // in D1 only, due beyond the lookahead
  "scheduled", // in its bucket, waiting for its due time (first run or retry backoff)
  "dispatched", // sent to the fire queue, not yet claimed
  "running", // claimed: holds a lease (token, fencing seq, deadline)
  "succeeded",
  "dead",
  "canceled",
] as const;
export type ExecutionState = (typeof EXECUTION_STATES)[number];

export const TERMINAL_STATES = ["succeeded", "dead", "canceled"] as const satisfies readonly ExecutionState[];
export type TerminalState = (typeof TERMINAL_STATES)[number];

export const TRANSITIONS = {
  /** scanner or create hands a D1 row to its bucket */
  handOff: { from: ["pending"], to: "scheduled" },
  /** alarm at due time sends it to the queue */
  dispatch: { from: ["scheduled"], to: "dispatched" },
  /** dispatch deadline passed unclaimed: send again (failure row "message lost") */
  redispatch: { from: ["dispatched"], to: "dispatched" },
  /** a consumer takes a lease */
  claim: { from: ["dispatched"], to: "running" },
  /** the target answered 2xx */
  succeed: { from: ["running"], to: "succeeded" },
  /** retryable failure or lease expiry with attempts left: back off */
  retry: { from: ["running"], to: "scheduled" },
  /** permanent failure, attempts exhausted, poison, or undeliverable */
  kill: { from: ["scheduled", "dispatched", "running"], to: "dead" },
  /** user cancel: a running attempt finishes, nothing new fires */
  cancel: { from: ["pending", "scheduled", "dispatched"], to: "canceled" },
  /** dead -> scheduled with a fresh attempt budget */
  redrive: { from: ["dead"], to: "scheduled" },
  /** resume or PATCH schedules an occurrence that pause or a reschedule canceled */
  reopen: { from: ["canceled"], to: "scheduled" },
} as const satisfies Record<string, { from: readonly ExecutionState[]; to: ExecutionState }>;

export type Transition = keyof typeof TRANSITIONS;

export function isTerminal(state: ExecutionState): state is TerminalState {
  return (TERMINAL_STATES as readonly string[]).includes(state);
}

export function canApply(transition: Transition, from: ExecutionState): boolean {
  return (TRANSITIONS[transition].from as readonly string[]).includes(from);
}

/** "'a','b'" for a transition's from-states, for SQL guards (constants only, never user input). */
export function fromStatesSql(transition: Transition): string {
  return TRANSITIONS[transition].from.map((s) => `'${s}'`).join(",");
}

/** The CHECK constraint both schemas use, so storage can't hold a state the table doesn't know. */
export function statusCheckSql(column = "status"): string {
  return `CHECK (${column} IN (${EXECUTION_STATES.map((s) => `'${s}'`).join(",")}))`;
}
