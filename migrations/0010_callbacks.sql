-- Callbacks (issue 29): an execution's callbacks (JSON, core/callback.ts CallbackState[]), written
-- by its bucket with its outcome and again when its callback ends; NULL for a job without callbacks
ALTER TABLE jobs ADD COLUMN callbacks TEXT;
ALTER TABLE occurrences ADD COLUMN callbacks TEXT;
