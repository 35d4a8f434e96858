/** Type-prefixed, time-sortable ids (job_..., exe_...): 10 chars of time, 16 of randomness. */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export function newId(prefix: "job" | "exe" | "act", now: number, random: Uint8Array): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let rand = "";
  for (let i = 0; i < 16; i++) rand += ALPHABET[(random[i] ?? 0) % 32];
  return `${prefix}_${time}${rand}`;
}

/**
 * An occurrence's execution id follows from its job and due time, so the same occurrence always
 * has the same id: a retried alarm, a repeated hand-off or a duplicate mirror collapse on it.
 */
export function occurrenceId(jobId: string, occurrenceAt: number): string {
  const jobRandom = jobId.slice(-16);
  return `exe_${newId("exe", occurrenceAt, new Uint8Array(16)).slice(4, 14)}${jobRandom}`;
}

/**
 * A one-off job has one execution, named after the job (its random and time parts), so the
 * execution id and the job id are found from each other without a lookup.
 */
export function oneOffExecutionId(jobId: string): string {
  return `exe_${jobId.slice(4)}`;
}

export function jobIdOfOneOff(executionId: string): string {
  return `job_${executionId.slice(4)}`;
}
