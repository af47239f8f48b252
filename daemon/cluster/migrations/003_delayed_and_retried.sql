-- 003_delayed_and_retried.sql: delayed starts and retries in a cluster.
--
-- A delayed job is a row in the state `scheduled` until start_at (the database's clock at its
-- insert plus its delay): it is not in the counters, so it is no work ahead of anyone, and no
-- claim reads it. At its start a maintenance pass admits it (sandglass_promote_due, functions.sql)
-- and makes it `queued`, or ends it rejected. Its deadline counts its budget from start_at.
--
-- A job with a retry carries its spec; the claiming node retries it locally, within the same
-- claim (attempt and owner unchanged), and writes the attempts with its outcome.
ALTER TABLE sandglass_jobs
  ADD COLUMN start_at         timestamptz,  -- a delayed job's start; NULL: none
  ADD COLUMN retry_max        integer,      -- attempts in all, the first included; NULL: one
  ADD COLUMN retry_backoff_us bigint,       -- cap of the wait before the first retry
  ADD COLUMN attempts         text,         -- the record's "attempts", a JSON array; NULL: none
  ADD COLUMN retry_stopped    text;         -- the record's "retry_stopped"; NULL: none

-- The maintenance pass's due rows, earliest start first.
CREATE INDEX sandglass_jobs_scheduled ON sandglass_jobs (start_at) WHERE state = 'scheduled';

-- New arguments (the delays and retry specs of a submission, the attempts of an outcome) and
-- new result columns (a claim's retry spec): the old definitions go, functions.sql makes the
-- new ones.
DROP FUNCTION IF EXISTS sandglass_submit_claim(text, text, integer, text[], text[], text[],
                                               smallint[], text[], text[], bigint[], bigint[],
                                               bigint[], bigint[], bigint, boolean[], uuid[]);
DROP FUNCTION IF EXISTS sandglass_claim(text, text, integer, text[], bigint[]);
DROP FUNCTION IF EXISTS sandglass_finish(text, bigint[], integer[], text[], text[], text[],
                                         boolean[], text[], text[], bigint[], boolean);
DROP FUNCTION IF EXISTS sandglass_finish_claim(text, text, bigint[], integer[], text[], text[],
                                               text[], boolean[], text[], text[], bigint[],
                                               integer, text[], bigint[], boolean);
