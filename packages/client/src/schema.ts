// Generated from openapi.json by openapi-typescript (npm run openapi). Do not edit.

export interface paths {
    "/v1/jobs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Your jobs, newest first; with status, name or url a page may be short: follow nextCursor */
        get: operations["listJobs"];
        put?: never;
        /** Create a job */
        post: operations["createJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create up to 1000 jobs */
        post: operations["createJobs"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A job with its latest execution */
        get: operations["getJob"];
        put?: never;
        post?: never;
        /** Cancel a job */
        delete: operations["cancelJob"];
        options?: never;
        head?: never;
        /** Change a job */
        patch: operations["updateJob"];
        trace?: never;
    };
    "/v1/jobs/{id}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause a recurring job */
        post: operations["pauseJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume a paused recurring job */
        post: operations["resumeJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Cancel many jobs, by ids or by a filter, in the background */
        post: operations["cancelJobs"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause many jobs, by ids or by a filter, in the background */
        post: operations["pauseJobs"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume many jobs, by ids or by a filter, in the background */
        post: operations["resumeJobs"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dlq/redrive": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Redrive many dead executions, by ids or by a filter, in the background */
        post: operations["redriveDeadExecutions"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/actions/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A bulk action's progress */
        get: operations["getAction"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}/executions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A job's executions, latest first, with their attempts */
        get: operations["listJobExecutions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/executions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Your executions, newest first, filtered: one-off jobs' and finished occurrences (with jobId, the job's live ones too); a page may be short, follow nextCursor */
        get: operations["listExecutions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/executions/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One execution */
        get: operations["getExecution"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/archive": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant's history archive objects (gzip NDJSON, one line per execution), in time order */
        get: operations["listArchive"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/archive/object": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One archive object of the tenant, as stored (application/gzip) */
        get: operations["getArchiveObject"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/executions/{id}/redrive": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Run a dead execution again with a fresh attempt budget */
        post: operations["redriveExecution"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dlq": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Dead executions, latest first */
        get: operations["listDeadExecutions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/alerts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant's alert target */
        get: operations["getAlertTarget"];
        /** Set the tenant's alert target: its dead executions and (with throttledForMs) its throttled flow keys, as signed digests (docs/alerts.md) */
        put: operations["setAlertTarget"];
        post?: never;
        /** Remove the tenant's alert target (deaths waiting for a digest are dropped) */
        delete: operations["deleteAlertTarget"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/flow-control/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A flow-control key */
        get: operations["getFlowKey"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change a key's limits live (null lifts one) */
        patch: operations["updateFlowKey"];
        trace?: never;
    };
    "/v1/flow-control/{key}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Stop starting the key's executions */
        post: operations["pauseFlowKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/flow-control/{key}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Start the key's executions again */
        post: operations["resumeFlowKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/pull/{queue}/lease": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A pull worker leases due executions of a pull queue (long polling with waitMs) */
        post: operations["leasePull"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/pull/{queue}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** How much waits in a pull queue */
        get: operations["getPullQueue"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/pull/leases/{token}/heartbeat": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Extend a lease by its length */
        post: operations["heartbeatPullLease"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/pull/leases/{token}/complete": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Report the attempt succeeded */
        post: operations["completePullLease"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/pull/leases/{token}/fail": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Report the attempt failed: retried with the job's backoff, or dead when not retryable or out of attempts */
        post: operations["failPullLease"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Counters, dead by reason, fire lag and flow-control keys of your tenant */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The metrics in Prometheus text format */
        get: operations["getPrometheusMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness */
        get: operations["health"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This document */
        get: operations["openapi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        Job: {
            id: string;
            name: string | null;
            /** @enum {string} */
            status: "active" | "paused" | "canceled" | "completed";
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            nextRunAt: string | null;
            /** @description recurring jobs only */
            schedule?: {
                cron: string;
                timezone: string;
                /**
                 * Format: date-time
                 * @description RFC 3339, UTC
                 */
                startAt: string | null;
                /**
                 * Format: date-time
                 * @description RFC 3339, UTC
                 */
                endAt: string | null;
                maxOccurrences: number | null;
                /** @enum {string} */
                catchUp: "none" | "one" | "all";
            };
            /** @description GET /v1/jobs/{id} of a recurring job: the next five occurrences */
            nextRuns?: string[];
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            updatedAt: string;
            target: components["schemas"]["Target"];
            timeoutMs: number;
            retry: components["schemas"]["RetryPolicy"];
            metadata: {
                [key: string]: unknown;
            } | null;
            flowControl: components["schemas"]["FlowControl"] | null;
            /** @description the W3C trace the job was created in (null: none) */
            trace: components["schemas"]["Trace"] | null;
            /** @description 0-9 (5 unless set): its turn among the tenant's due executions waiting */
            priority: number;
            /** @description the job's labels ({} when none) */
            labels: {
                [key: string]: string;
            };
            idempotencyKey: string | null;
            /** @description debounced jobs only: the key and its rule */
            debounce?: {
                key: string;
                /** @enum {string} */
                mode: "trailing" | "leading";
                delayMs: number;
                maxDelayMs: number | null;
                /** @description create answers only: this create replaced the key's pending job (its target, settings and run time) instead of making a new one */
                replaced?: boolean;
                /** @description create answers only (leading): this create was absorbed by the key's window; the job shown is the one that ran */
                absorbed?: boolean;
            };
            /** @description told each execution that succeeded (absent: none) */
            callback?: {
                url: string;
                headers: {
                    [key: string]: string;
                };
            } | {
                worker: string;
            };
            /** @description told each execution that died (absent: none) */
            failureCallback?: {
                url: string;
                headers: {
                    [key: string]: string;
                };
            } | {
                worker: string;
            };
        };
        Target: components["schemas"]["HttpTarget"] | components["schemas"]["WorkerTarget"] | components["schemas"]["PullTarget"];
        HttpTarget: {
            url: string;
            /** @enum {string} */
            method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
            headers: {
                [key: string]: string;
            };
            /** @description the body as it is sent (JSON bodies serialized) */
            body: string | null;
        };
        WorkerTarget: {
            /** @description the handler Worker, called over a service binding */
            worker: string;
            /** @description the JSON value its deliver() method gets (null: none) */
            payload?: unknown;
        };
        PullTarget: {
            /** @description the pull queue its executions wait in for a worker */
            pull: string;
            /** @description the JSON value handed out with each lease (null: none) */
            payload?: unknown;
        };
        RetryPolicy: {
            maxAttempts: number;
            initialDelayMs: number;
            maxDelayMs: number;
            factor: number;
            jitter: number;
        };
        FlowControl: {
            key: string;
            rate: number | null;
            periodSeconds: number;
            parallelism: number | null;
        };
        Trace: {
            /** @description the parent of every attempt's span (version 00) */
            traceparent: string;
            /** @description passed on to every attempt as given */
            tracestate?: string;
        };
        Error: {
            error: {
                /** @description machine-readable, e.g. invalid_field, not_found, rate_limited */
                code: string;
                message: string;
                /** @description the field at fault (jobs[3].target.url), or null */
                field: string | null;
            };
        };
        CreateJob: {
            name?: string;
            target: {
                /** @description an HTTP target: the URL called (give one of url, worker and pull) */
                url?: string;
                /**
                 * @description HTTP targets; default POST
                 * @enum {string}
                 */
                method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
                /** @description HTTP targets */
                headers?: {
                    [key: string]: string;
                };
                /** @description HTTP targets: a string is sent as its UTF-8 bytes, exactly; any other JSON value is sent serialized (application/json) */
                body?: unknown;
                /** @description a handler Worker target: its name in HANDLER_WORKERS, granted to your tenant (give one of url, worker and pull) */
                worker?: string;
                /** @description a pull queue of your tenant: its executions wait there for workers that lease them (POST /v1/pull/{queue}/lease); give one of url, worker and pull */
                pull?: string;
                /** @description handler Worker and pull targets: any JSON value, passed to deliver() or handed out with each lease */
                payload?: unknown;
            };
            /** @description RFC 3339 with an offset, or epoch milliseconds */
            runAt?: string | number;
            /**
             * @description "500ms", "30s", "5m", "2h", "1d", or milliseconds
             * @example 30s
             * @example 5000
             */
            delay?: string | number;
            /**
             * @description 5 fields (minute) or 6 (seconds first); excludes runAt and delay
             * @example 0 9 * * 1-5
             */
            cron?: string;
            /**
             * @description an IANA zone, default UTC
             * @example Europe/Berlin
             */
            timezone?: string;
            /** @description RFC 3339 with an offset, or epoch milliseconds */
            startAt?: string | number;
            /** @description RFC 3339 with an offset, or epoch milliseconds */
            endAt?: string | number;
            maxOccurrences?: number;
            /** @enum {string} */
            catchUp?: "none" | "one" | "all";
            timeoutMs?: number;
            retry?: {
                maxAttempts?: number;
                initialDelayMs?: number;
                maxDelayMs?: number;
                factor?: number;
                jitter?: number;
            };
            metadata?: {
                [key: string]: unknown;
            };
            idempotencyKey?: string;
            flowControl?: {
                key: string;
                rate?: number;
                periodSeconds?: number;
                parallelism?: number;
            };
            /**
             * @description at most 16 labels; keys 63 characters, values 128
             * @example {
             *       "team": "billing",
             *       "env": "prod"
             *     }
             */
            labels?: {
                [key: string]: string;
            };
            /**
             * @description the trace this job belongs to (W3C Trace Context); default: the create request's traceparent and tracestate headers. Each attempt is sent a child traceparent of it
             * @example {
             *       "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
             *     }
             */
            trace?: {
                traceparent: string;
                tracestate?: string;
            };
            debounce?: components["schemas"]["DebounceInput"];
            /** @description told each execution that succeeded (docs/callbacks.md) */
            callback?: {
                /** @description an HTTP target: the URL called (give one of url, worker and pull) */
                url?: string;
                /** @description HTTP targets */
                headers?: {
                    [key: string]: string;
                };
                /** @description a handler Worker target: its name in HANDLER_WORKERS, granted to your tenant (give one of url, worker and pull) */
                worker?: string;
            };
            /** @description told each execution that died after its last attempt (docs/callbacks.md) */
            failureCallback?: {
                /** @description an HTTP target: the URL called (give one of url, worker and pull) */
                url?: string;
                /** @description HTTP targets */
                headers?: {
                    [key: string]: string;
                };
                /** @description a handler Worker target: its name in HANDLER_WORKERS, granted to your tenant (give one of url, worker and pull) */
                worker?: string;
            };
            /**
             * @description 0-9, default 5: among the tenant's due executions waiting their turn (dispatch, a flow-control key, a pull queue) higher goes first; one step higher per 60 s waited, so none starves. Never earlier than its due time.
             * @example 9
             */
            priority?: number;
        };
        DebounceInput: {
            key: string;
            /**
             * @description trailing: the job runs this long after the latest create; leading: creates within it are absorbed
             * @example 30s
             * @example 5000
             */
            delay: string | number;
            /**
             * @description at least delay: the job runs (trailing) or a new one may run (leading) at most this long after the window's first create
             * @example 30s
             * @example 5000
             */
            maxDelay?: string | number;
            /**
             * @default trailing
             * @enum {string}
             */
            mode?: "trailing" | "leading";
        };
        BatchResults: {
            results: ({
                /** @description 201 created, 200 an idempotent repeat or a debounced create that replaced or was absorbed (job.debounce says which) */
                status: number;
                job: components["schemas"]["Job"];
            } | {
                error: {
                    /** @description machine-readable, e.g. invalid_field, not_found, rate_limited */
                    code: string;
                    message: string;
                    /** @description the field at fault (jobs[3].target.url), or null */
                    field: string | null;
                };
                /** @description the status this item alone would get */
                status: number;
            })[];
        };
        CreateJobBatch: {
            jobs: components["schemas"]["CreateJob"][];
        };
        JobList: {
            jobs: components["schemas"]["Job"][];
            nextCursor: string | null;
        };
        JobWithLatestExecution: {
            id: string;
            name: string | null;
            /** @enum {string} */
            status: "active" | "paused" | "canceled" | "completed";
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            nextRunAt: string | null;
            /** @description recurring jobs only */
            schedule?: {
                cron: string;
                timezone: string;
                /**
                 * Format: date-time
                 * @description RFC 3339, UTC
                 */
                startAt: string | null;
                /**
                 * Format: date-time
                 * @description RFC 3339, UTC
                 */
                endAt: string | null;
                maxOccurrences: number | null;
                /** @enum {string} */
                catchUp: "none" | "one" | "all";
            };
            /** @description GET /v1/jobs/{id} of a recurring job: the next five occurrences */
            nextRuns?: string[];
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            updatedAt: string;
            target: components["schemas"]["Target"];
            timeoutMs: number;
            retry: components["schemas"]["RetryPolicy"];
            metadata: {
                [key: string]: unknown;
            } | null;
            flowControl: components["schemas"]["FlowControl"] | null;
            /** @description the W3C trace the job was created in (null: none) */
            trace: components["schemas"]["Trace"] | null;
            /** @description 0-9 (5 unless set): its turn among the tenant's due executions waiting */
            priority: number;
            /** @description the job's labels ({} when none) */
            labels: {
                [key: string]: string;
            };
            idempotencyKey: string | null;
            /** @description debounced jobs only: the key and its rule */
            debounce?: {
                key: string;
                /** @enum {string} */
                mode: "trailing" | "leading";
                delayMs: number;
                maxDelayMs: number | null;
                /** @description create answers only: this create replaced the key's pending job (its target, settings and run time) instead of making a new one */
                replaced?: boolean;
                /** @description create answers only (leading): this create was absorbed by the key's window; the job shown is the one that ran */
                absorbed?: boolean;
            };
            /** @description told each execution that succeeded (absent: none) */
            callback?: {
                url: string;
                headers: {
                    [key: string]: string;
                };
            } | {
                worker: string;
            };
            /** @description told each execution that died (absent: none) */
            failureCallback?: {
                url: string;
                headers: {
                    [key: string]: string;
                };
            } | {
                worker: string;
            };
            latestExecution: components["schemas"]["Execution"] | null;
        };
        Execution: {
            /** @description exe_…; also the webhook-id and Idempotency-Key of every delivery */
            id: string;
            jobId: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            dueAt: string;
            /** @enum {string} */
            status: "pending" | "scheduled" | "dispatched" | "running" | "succeeded" | "dead" | "canceled";
            lastHttpStatus: number | null;
            lastError: string | null;
            /** @description permanent, attempts_exhausted or poison */
            deadReason: string | null;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            finishedAt: string | null;
            /** @description the callback its outcome fired, if its job names one (docs/callbacks.md) */
            callbacks: components["schemas"]["Callback"][];
            /** @description attempts made */
            attempts: number;
        };
        Callback: {
            /**
             * @description success: the job's callback; failure: its failureCallback
             * @enum {string}
             */
            kind: "success" | "failure";
            /** @enum {string} */
            status: "scheduled" | "succeeded" | "dead";
            attempts: number;
        };
        UpdateJob: {
            name?: string | null;
            target?: {
                /** @description an HTTP target: the URL called (give one of url, worker and pull) */
                url?: string;
                /**
                 * @description HTTP targets; default POST
                 * @enum {string}
                 */
                method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
                /** @description HTTP targets */
                headers?: {
                    [key: string]: string;
                };
                /** @description HTTP targets: a string is sent as its UTF-8 bytes, exactly; any other JSON value is sent serialized (application/json) */
                body?: unknown;
                /** @description a handler Worker target: its name in HANDLER_WORKERS, granted to your tenant (give one of url, worker and pull) */
                worker?: string;
                /** @description a pull queue of your tenant: its executions wait there for workers that lease them (POST /v1/pull/{queue}/lease); give one of url, worker and pull */
                pull?: string;
                /** @description handler Worker and pull targets: any JSON value, passed to deliver() or handed out with each lease */
                payload?: unknown;
            };
            /** @description RFC 3339 with an offset, or epoch milliseconds */
            runAt?: string | number;
            /**
             * @description "500ms", "30s", "5m", "2h", "1d", or milliseconds
             * @example 30s
             * @example 5000
             */
            delay?: string | number;
            /**
             * @description 5 fields (minute) or 6 (seconds first); excludes runAt and delay
             * @example 0 9 * * 1-5
             */
            cron?: string;
            /**
             * @description an IANA zone, default UTC
             * @example Europe/Berlin
             */
            timezone?: string;
            /** @description RFC 3339 with an offset, or epoch milliseconds */
            startAt?: string | number;
            /** @description RFC 3339 with an offset, or epoch milliseconds */
            endAt?: string | number;
            maxOccurrences?: number;
            /** @enum {string} */
            catchUp?: "none" | "one" | "all";
            timeoutMs?: number;
            retry?: {
                maxAttempts?: number;
                initialDelayMs?: number;
                maxDelayMs?: number;
                factor?: number;
                jitter?: number;
            };
            metadata?: {
                [key: string]: unknown;
            } | null;
            flowControl?: {
                key: string;
                rate?: number;
                periodSeconds?: number;
                parallelism?: number;
            } | null;
            /**
             * @description at most 16 labels; keys 63 characters, values 128
             * @example {
             *       "team": "billing",
             *       "env": "prod"
             *     }
             */
            labels?: {
                [key: string]: string;
            } | null;
            callback?: components["schemas"]["CallbackInput"];
            failureCallback?: components["schemas"]["CallbackInput"];
            /**
             * @description the trace this job belongs to (W3C Trace Context); default: the create request's traceparent and tracestate headers. Each attempt is sent a child traceparent of it
             * @example {
             *       "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
             *     }
             */
            trace?: {
                traceparent: string;
                tracestate?: string;
            } | null;
            /**
             * @description 0-9, default 5: among the tenant's due executions waiting their turn (dispatch, a flow-control key, a pull queue) higher goes first; one step higher per 60 s waited, so none starves. Never earlier than its due time.
             * @example 9
             */
            priority?: number;
        };
        /** @description a URL (with headers) or a handler Worker: give one of url and worker */
        CallbackInput: {
            /** @description an HTTP target: the URL called (give one of url, worker and pull) */
            url?: string;
            /** @description HTTP targets */
            headers?: {
                [key: string]: string;
            };
            /** @description a handler Worker target: its name in HANDLER_WORKERS, granted to your tenant (give one of url, worker and pull) */
            worker?: string;
        } | null;
        BulkAction: {
            /** @description act_…; GET /v1/actions/{id} follows it */
            id: string;
            /** @enum {string} */
            kind: "cancel" | "pause" | "resume" | "redrive";
            /** @enum {string} */
            status: "running" | "done";
            /** @description given by ids: how many */
            ids?: number;
            filter?: {
                status?: string;
                label?: string;
                jobId?: string;
                deadReason?: string;
            };
            /** @description jobs (or dead executions) found so far */
            matched: number;
            done: number;
            /** @description the change was refused (or nothing was found by that id): failures lists the first 20 */
            failed: number;
            failures: {
                /** @description the job's id, or the execution's for a redrive */
                id: string;
                code: string;
            }[];
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            finishedAt: string | null;
        };
        BulkJobs: {
            ids?: string[];
            filter?: {
                /** @enum {string} */
                status?: "active" | "paused" | "canceled" | "completed";
                /** @description key:value: only jobs with this label (the value is everything after the first colon) */
                label?: string;
            };
        };
        BulkRedrive: {
            ids?: string[];
            filter?: {
                jobId?: string;
                /** @enum {string} */
                deadReason?: "permanent" | "attempts_exhausted" | "poison";
            };
        };
        JobExecutions: {
            executions: components["schemas"]["ExecutionWithAttempts"][];
        };
        ExecutionWithAttempts: {
            /** @description exe_…; also the webhook-id and Idempotency-Key of every delivery */
            id: string;
            jobId: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            dueAt: string;
            /** @enum {string} */
            status: "pending" | "scheduled" | "dispatched" | "running" | "succeeded" | "dead" | "canceled";
            lastHttpStatus: number | null;
            lastError: string | null;
            /** @description permanent, attempts_exhausted or poison */
            deadReason: string | null;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            finishedAt: string | null;
            /** @description the callback its outcome fired, if its job names one (docs/callbacks.md) */
            callbacks: components["schemas"]["Callback"][];
            attempts: components["schemas"]["Attempt"][];
        };
        Attempt: {
            attempt: number;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            dueAt: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            startedAt: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            finishedAt: string | null;
            outcome: string | null;
            httpStatus: number | null;
            error: string | null;
            /** @description startedAt − dueAt */
            lagMs: number;
            /** @description how long flow control held it back before dueAt (0: it did not wait) */
            waitMs: number;
            /** @description a successful attempt's response body (a handler Worker's detail), its first 256 characters; a failure's is in error */
            responseExcerpt: string | null;
            /** @description the attempt's span id in the job's trace: the parent id of the traceparent it was sent (null: the job has no trace) */
            spanId: string | null;
        };
        ExecutionList: {
            executions: components["schemas"]["Execution"][];
            nextCursor: string | null;
        };
        ArchivedExecution: {
            /** @description exe_…; also the webhook-id and Idempotency-Key of every delivery */
            id: string;
            jobId: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            dueAt: string;
            /** @enum {string} */
            status: "pending" | "scheduled" | "dispatched" | "running" | "succeeded" | "dead" | "canceled";
            lastHttpStatus: number | null;
            lastError: string | null;
            /** @description permanent, attempts_exhausted or poison */
            deadReason: string | null;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            finishedAt: string | null;
            /** @description the callback its outcome fired, if its job names one (docs/callbacks.md) */
            callbacks: components["schemas"]["Callback"][];
            /** @description attempts made */
            attempts: number;
            /**
             * @description read from the history archive (R2): D1 no longer holds it
             * @enum {boolean}
             */
            archived: true;
            /** @description the archive object holding it (GET /v1/archive/object?key=...) */
            archiveKey: string;
        };
        ArchiveList: {
            objects: components["schemas"]["ArchiveObject"][];
            nextCursor: string | null;
        };
        ArchiveObject: {
            /** @description the object's key in the archive bucket */
            key: string;
            /** @description bytes (gzip) */
            size: number;
            /** @description lines: one per execution */
            executions: number;
            firstId: string;
            lastId: string;
            uploadedAt: string;
        };
        RedrivenExecution: {
            /** @description exe_…; also the webhook-id and Idempotency-Key of every delivery */
            id: string;
            jobId: string;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            dueAt: string;
            /** @enum {string} */
            status: "pending" | "scheduled" | "dispatched" | "running" | "succeeded" | "dead" | "canceled";
            lastHttpStatus: number | null;
            lastError: string | null;
            /** @description permanent, attempts_exhausted or poison */
            deadReason: string | null;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            finishedAt: string | null;
            /** @description the callback its outcome fired, if its job names one (docs/callbacks.md) */
            callbacks: components["schemas"]["Callback"][];
            /** @description attempts made */
            attempts: number;
            /** @enum {boolean} */
            redriven: true;
        };
        AlertTarget: {
            url: string;
            headers: {
                [key: string]: string;
            };
            /** @description a flow key throttled by its target without a break for longer than this is reported; null: never */
            throttledForMs: number | null;
            /** @description at most one digest per this many milliseconds */
            digestIntervalMs: number;
            /** @description executions a digest lists at most; the rest are counted */
            digestMaxListed: number;
        };
        AlertTargetInput: {
            /** @description the URL each digest is POSTed to (the target rules of a job's url) */
            url: string;
            /** @description HTTP targets */
            headers?: {
                [key: string]: string;
            };
            /** @description also report a flow key of the tenant that its target throttled (429/503 Retry-After) without a break for longer than this (docs/alerts.md); null or absent: never */
            throttledForMs?: number | null;
        };
        FlowKey: {
            key: string;
            limits: {
                rate: number | null;
                periodSeconds: number;
                parallelism: number | null;
                /**
                 * @description api: set with PATCH; job: the latest job asking
                 * @enum {string|null}
                 */
                from: "api" | "job" | null;
            };
            paused: boolean;
            /**
             * Format: date-time
             * @description RFC 3339, UTC
             */
            throttledUntil: string | null;
            inFlight: number;
            waiting: number;
            currentRate: number;
            grantedTotal: number;
            throttledTotal: number;
        };
        FlowLimits: {
            rate?: number | null;
            periodSeconds?: number;
            parallelism?: number | null;
        };
        PullLeases: {
            leases: components["schemas"]["PullLease"][];
        };
        PullLease: {
            /** @description the lease token: heartbeat, complete or fail with it (opaque) */
            token: string;
            /** @description the idempotency key of the work: the same on every attempt */
            executionId: string;
            jobId: string;
            /** @description 1 for the first attempt */
            attempt: number;
            /** @description when this attempt was due */
            dueAt: string;
            /** @description the lease ends then unless heartbeated; then the execution may run again */
            leaseDeadlineAt: string;
            /** @description the job's target payload (null: none) */
            payload?: unknown;
            /** @description when the job has a W3C trace: this attempt's span as the parent (a new span id per attempt) */
            traceparent?: string;
            /** @description the job's tracestate, as given */
            tracestate?: string;
        };
        PullLeaseRequest: {
            /**
             * @description at most this many executions (default 1)
             * @default 1
             */
            max?: number;
            /**
             * @description how long each lease lasts unless heartbeated (default 30000); a heartbeat extends it by as much
             * @default 30000
             */
            leaseMs?: number;
            /**
             * @description long polling: with nothing to lease, wait up to this long for work (default 0: answer at once)
             * @default 0
             */
            waitMs?: number;
        };
        PullQueueStatus: {
            queue: string;
            /** @description executions due and waiting for a worker */
            waiting: number;
            /** @description the due time of the oldest waiting one */
            oldestDueAt: string | null;
            /** @description lease requests waiting for work right now (long polling) */
            pollers: number;
        };
        PullHeartbeat: {
            executionId: string;
            leaseDeadlineAt: string;
            /** @description the job was canceled or paused meanwhile: stop if you can (its result is kept if you finish) */
            canceled: boolean;
        };
        PullReport: {
            executionId: string;
            /**
             * @description what became of the execution: scheduled = it will be retried (or run again at a new time)
             * @enum {string}
             */
            status: "succeeded" | "scheduled" | "dead" | "canceled";
        };
        PullFailure: {
            /**
             * @description false: no retry, the execution is dead (permanent)
             * @default true
             */
            retryable?: boolean;
            /** @description what went wrong, kept (an excerpt) on the attempt */
            error?: string;
            /** @description retry no sooner than this (like Retry-After); the job's backoff otherwise */
            retryAfterMs?: number;
        };
        Metrics: {
            counters: {
                [key: string]: number;
            };
            dead_total_by_reason: {
                [key: string]: number;
            };
            /** @description D1 rows written per shard (its index) */
            d1_rows_written_total_by_shard: {
                [key: string]: number;
            };
            /** @description each D1 shard's size, watermarks and oldest history (the whole deployment's) */
            d1_shards: {
                shard: number;
                binding: string;
                /** @description the shard's size (meta.size_after); null when it did not answer */
                bytes: number | null;
                /** @description HISTORY_MAX_BYTES: above it history is purged before the retention */
                historyMaxBytes: number;
                /** @description SHARD_MAX_BYTES: above it the shard takes no new jobs */
                shardMaxBytes: number;
                /** @description the oldest finished history it holds */
                oldestHistoryAt: string | null;
                error?: string;
            }[];
            fire_lag_ms: {
                count: number;
                p50: number | null;
                p95: number | null;
                p99: number | null;
                buckets: {
                    le: string;
                    count: number;
                }[];
            };
            flowControl: {
                keys: (components["schemas"]["FlowKey"] | {
                    error: {
                        /** @description machine-readable, e.g. invalid_field, not_found, rate_limited */
                        code: string;
                        message: string;
                        /** @description the field at fault (jobs[3].target.url), or null */
                        field: string | null;
                    };
                    key: string;
                })[];
                truncated: boolean;
                /** @description present when the key list could not be read */
                error?: {
                    /** @description machine-readable, e.g. invalid_field, not_found, rate_limited */
                    code: string;
                    message: string;
                    /** @description the field at fault (jobs[3].target.url), or null */
                    field: string | null;
                };
            };
        };
        Health: {
            /** @enum {boolean} */
            ok: true;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listJobs: {
        parameters: {
            query?: {
                status?: "active" | "paused" | "canceled" | "completed";
                /** @description key:value: only jobs with this label (the value is everything after the first colon) */
                label?: string;
                /** @description only jobs whose name starts with this (case-sensitive) */
                name?: string;
                /** @description only jobs with an HTTP target whose URL starts with this (as the job shows it) */
                url?: string;
                limit?: number;
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description a page; follow nextCursor */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobList"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createJob: {
        parameters: {
            query?: never;
            header?: {
                /** @description or idempotencyKey in the body */
                "Idempotency-Key"?: string;
                /** @description W3C traceparent: the jobs belong to this trace unless one gives trace in its body; an invalid one is ignored */
                traceparent?: string;
                /** @description W3C tracestate, kept with traceparent */
                tracestate?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateJob"];
            };
        };
        responses: {
            /** @description the idempotency key was seen with the same request: the original job; or debounce replaced the key's pending job (debounce.replaced) or absorbed this create (debounce.absorbed): the job that runs */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description idempotency_key_reused: the key was used with a different request; or idempotency_job_purged: the key's job left the history and the archive does not hold it (send it with a new key) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description shards_full: every D1 shard is above SHARD_MAX_BYTES with live jobs (the message names them): nothing was stored; add a shard */
            507: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createJobs: {
        parameters: {
            query?: never;
            header?: {
                /** @description W3C traceparent: the jobs belong to this trace unless one gives trace in its body; an invalid one is ignored */
                traceparent?: string;
                /** @description W3C tracestate, kept with traceparent */
                tracestate?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateJobBatch"];
            };
        };
        responses: {
            /** @description one result per job, in request order */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchResults"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description shards_full: every D1 shard is above SHARD_MAX_BYTES with live jobs (the message names them): nothing was stored; add a shard */
            507: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the job's id (job_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the job */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobWithLatestExecution"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    cancelJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the job's id (job_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description canceled: applied (the job's bucket holds the change) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description canceled: durable and converging (the next sync pass applies it; sending it again re-sends it) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the job already ended (completed), or conflict: the job changed meanwhile (read it and try again) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    updateJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the job's id (job_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateJob"];
            };
        };
        responses: {
            /** @description changed: applied (the job's bucket holds the change) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description changed: durable and converging (the next sync pass applies it; sending it again re-sends it) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description not_changeable: the job is canceled or completed, or conflict: the job changed meanwhile (read it and try again) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    pauseJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the job's id (job_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description paused: applied (the job's bucket holds the change) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description paused: durable and converging (the next sync pass applies it; sending it again re-sends it) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description not_recurring (a one-off job), or the job is not active, or conflict: the job changed meanwhile (read it and try again) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    resumeJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the job's id (job_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description resumed: applied (the job's bucket holds the change) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description resumed: durable and converging (the next sync pass applies it; sending it again re-sends it) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description not_recurring (a one-off job), or the job is not paused, or conflict: the job changed meanwhile (read it and try again) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    cancelJobs: {
        parameters: {
            query?: never;
            header?: {
                /** @description the same key again answers the same action */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BulkJobs"];
            };
        };
        responses: {
            /** @description started (or, with a key seen before, the action it started) */
            202: {
                headers: {
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkAction"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description idempotency_key_reused: the Idempotency-Key started an action with another selection */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    pauseJobs: {
        parameters: {
            query?: never;
            header?: {
                /** @description the same key again answers the same action */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BulkJobs"];
            };
        };
        responses: {
            /** @description started (or, with a key seen before, the action it started) */
            202: {
                headers: {
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkAction"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description idempotency_key_reused: the Idempotency-Key started an action with another selection */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    resumeJobs: {
        parameters: {
            query?: never;
            header?: {
                /** @description the same key again answers the same action */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BulkJobs"];
            };
        };
        responses: {
            /** @description started (or, with a key seen before, the action it started) */
            202: {
                headers: {
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkAction"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description idempotency_key_reused: the Idempotency-Key started an action with another selection */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    redriveDeadExecutions: {
        parameters: {
            query?: never;
            header?: {
                /** @description the same key again answers the same action */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BulkRedrive"];
            };
        };
        responses: {
            /** @description started (or, with a key seen before, the action it started) */
            202: {
                headers: {
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkAction"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description idempotency_key_reused: the Idempotency-Key started an action with another selection */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getAction: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description act_… */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the action */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BulkAction"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such action */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listJobExecutions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the job's id (job_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description at most 100 executions */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobExecutions"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listExecutions: {
        parameters: {
            query?: {
                status?: "pending" | "scheduled" | "dispatched" | "running" | "succeeded" | "dead" | "canceled";
                /** @description only this job's executions, live ones from its bucket included */
                jobId?: string;
                /** @description key:value: only executions of jobs with this label */
                label?: string;
                /** @description only executions of jobs whose HTTP target URL starts with this */
                url?: string;
                /** @description the last attempt's HTTP status */
                httpStatus?: number;
                /** @description RFC 3339: due at or after */
                from?: string;
                /** @description RFC 3339: due at or before */
                to?: string;
                limit?: number;
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description a page; follow nextCursor */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExecutionList"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getExecution: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the execution's id (exe_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the execution; once D1 no longer holds it, from the history archive (`archived: true`; one R2 list per 1,000 objects of its hour, and one read) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Execution"] | components["schemas"]["ArchivedExecution"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such execution */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listArchive: {
        parameters: {
            query?: {
                prefix?: string;
                limit?: number;
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description a page; follow nextCursor */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ArchiveList"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description archive_not_configured: no R2 bucket is bound as ARCHIVE */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getArchiveObject: {
        parameters: {
            query: {
                key: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the object: gzip-compressed NDJSON */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/gzip": string;
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such object of the tenant, or archive_not_configured */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    redriveExecution: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the execution's id (exe_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description redriven */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RedrivenExecution"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no such execution */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description not_dead, job_canceled, job_inactive, or conflict (the job changed meanwhile); or the bucket's refusal: duplicate, unknown, not_due */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listDeadExecutions: {
        parameters: {
            query?: {
                limit?: number;
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description a page; follow nextCursor */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExecutionList"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getAlertTarget: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the alert target */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AlertTarget"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description no alert target is set */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    setAlertTarget: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AlertTargetInput"];
            };
        };
        responses: {
            /** @description the alert target */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AlertTarget"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteAlertTarget: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description removed (or there was none) */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getFlowKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a key of yours (letters, digits and . _ : @ -) or an origin's, URL-encoded: origin%3Ahttps%3A%2F%2Fapi.example.com */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the key */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FlowKey"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    updateFlowKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a key of yours (letters, digits and . _ : @ -) or an origin's, URL-encoded: origin%3Ahttps%3A%2F%2Fapi.example.com */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["FlowLimits"];
            };
        };
        responses: {
            /** @description the key */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FlowKey"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    pauseFlowKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a key of yours (letters, digits and . _ : @ -) or an origin's, URL-encoded: origin%3Ahttps%3A%2F%2Fapi.example.com */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the key */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FlowKey"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    resumeFlowKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a key of yours (letters, digits and . _ : @ -) or an origin's, URL-encoded: origin%3Ahttps%3A%2F%2Fapi.example.com */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the key */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FlowKey"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    leasePull: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the pull queue's name (lower case letters, digits, - and _) */
                queue: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PullLeaseRequest"];
            };
        };
        responses: {
            /** @description the leases granted, oldest due first (none when nothing was due within waitMs) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PullLeases"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getPullQueue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the pull queue's name (lower case letters, digits, - and _) */
                queue: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the queue */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PullQueueStatus"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    heartbeatPullLease: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a lease token from POST /v1/pull/{queue}/lease */
                token: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description extended */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PullHeartbeat"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description stale_lease: the lease is no longer yours (it expired, and the execution may run again elsewhere, or it was already reported); the rejection is counted */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    completePullLease: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a lease token from POST /v1/pull/{queue}/lease */
                token: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description recorded */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PullReport"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description stale_lease: the lease is no longer yours (it expired, and the execution may run again elsewhere, or it was already reported); the rejection is counted */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    failPullLease: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description a lease token from POST /v1/pull/{queue}/lease */
                token: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PullFailure"];
            };
        };
        responses: {
            /** @description recorded */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PullReport"];
                };
            };
            /** @description invalid input; `field` names the field at fault */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description stale_lease: the lease is no longer yours (it expired, and the execution may run again elsewhere, or it was already reported); the rejection is counted */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is larger than the route allows */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the metrics */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Metrics"];
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getPrometheusMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Prometheus text format 0.0.4 */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            /** @description missing, malformed or unknown API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description over the key's rate limit (1000 requests per 10 s) */
            429: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key */
            500: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key */
            503: {
                headers: {
                    /** @description seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    health: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description alive */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
        };
    };
    openapi: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OpenAPI 3.1 */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                };
            };
        };
    };
}
