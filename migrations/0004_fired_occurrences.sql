-- The highest occurrence number of a recurring job that has fired: its maxOccurrences budget,
-- kept on the job so neither a pause nor the history purge resets it.
ALTER TABLE jobs ADD COLUMN fired INTEGER NOT NULL DEFAULT 0;
