/**
 * An execution's outcome on its way to D1: held by the state machine (flight.ts Executions) from
 * the move that ended it until the flush wrote it (then the row leaves, a tombstone remembers it).
 */
import type { TerminalState } from "../core/lifecycle";
import type { AttemptRecord } from "./protocol";
import type { HeldRow } from "./store";

export interface Closing {
  row: HeldRow;
  status: TerminalState;
  attempts: number;
  finishedAt: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  /** the attempt that ended it, if one ran */
  last: AttemptRecord | null;
}

/** What an outcome records besides its state (Executions.close). */
export type ClosingDetail = Omit<Closing, "row" | "status">;

/** The moves that end an execution: each a row of the lifecycle table to a terminal state. */
export type CloseEvent = "succeed" | "kill" | "poison" | "cancel" | "abandon";
