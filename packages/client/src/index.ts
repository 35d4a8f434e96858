// The main entry: the client, its errors and the API's types. The webhook receiver stays on the
// "./receiver" subpath, so importing this one pulls in no dependency.
export type {
  ActionsApi,
  Attempt,
  BatchResult,
  BatchResults,
  BulkAction,
  BulkJobs,
  BulkRedrive,
  ClientOptions,
  CreateJob,
  DlqApi,
  Execution,
  ExecutionsApi,
  ExecutionWithAttempts,
  FlowControlApi,
  FlowKey,
  FlowLimits,
  Job,
  JobStatus,
  JobsApi,
  JobWithLatestExecution,
  Metrics,
  Paginated,
  PullApi,
  PullFailure,
  PullHeartbeat,
  PullLease,
  PullQueueStatus,
  PullReport,
  RedrivenExecution,
  UpdateJob,
} from "./client.ts";
export { SchedulerClient, VERSION } from "./client.ts";
export { SchedulerError, SchedulerNetworkError } from "./errors.ts";
export { type PullWorkerOptions, runPullWorker } from "./pull-worker.ts";
