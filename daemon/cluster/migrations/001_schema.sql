-- 001_schema.sql: the tables and indexes of cluster mode (see daemon/cluster/cluster_node.hpp).
-- The functions are in functions.sql, applied after the numbered files; a change of the schema
-- is a new numbered file after this one.
--
-- The database's clock is the only clock: a deadline is clock_timestamp() at insert plus the
-- budget left, and every decision that compares a deadline with "now" is taken in SQL, by the
-- same clock. Nodes only ever receive "remaining" durations.

CREATE TABLE sandglass_jobs (
  id               bigserial PRIMARY KEY,
  kind             text        NOT NULL,
  args             text        NOT NULL,          -- a JSON object, as the client sent it
  priority         smallint    NOT NULL,          -- 0 critical .. 3 sheddable
  idempotency_key  text,
  fingerprint      text,                          -- kind, args and priority of a keyed job
  budget_us        bigint      NOT NULL,
  work_us          bigint      NOT NULL DEFAULT 0, -- central estimate counted in the counters
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  deadline         timestamptz NOT NULL,
  state            text        NOT NULL DEFAULT 'queued',  -- queued, running, done
  owner            text,                          -- the claiming node's incarnation
  attempt          integer     NOT NULL DEFAULT 0, -- the fencing token: + 1 at every claim
  committed        boolean     NOT NULL DEFAULT false,  -- the run passed its commit point
  cancel_requested boolean     NOT NULL DEFAULT false,
  claimed_at       timestamptz,
  finished_at      timestamptz,
  node_ran         text,                          -- the node name of the last claim
  outcome_state    text,
  reason           text,
  cause            text,
  result           text,
  error            text,
  run_us           bigint,
  -- Someone waits for the outcome: its end is announced (functions.sql, "Announced
  -- outcomes"). True by default: a row no function marked is announced.
  awaited          boolean     NOT NULL DEFAULT true,
  -- The submission's random token, to find the row after an ambiguous COMMIT (intake.cpp).
  intake_token     uuid
);

CREATE UNIQUE INDEX sandglass_jobs_key ON sandglass_jobs (idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- The claim order: highest class first, earliest deadline first within a class.
CREATE INDEX sandglass_jobs_queue ON sandglass_jobs (priority, deadline) WHERE state = 'queued';
-- Whether any job of a kind is queued (sandglass_nothing_to_claim).
CREATE INDEX sandglass_jobs_queued_kind ON sandglass_jobs (kind) WHERE state = 'queued';
-- The sweep's and take-back's running rows of an owner.
CREATE INDEX sandglass_jobs_running ON sandglass_jobs (owner) WHERE state = 'running';
CREATE INDEX sandglass_jobs_intake_token ON sandglass_jobs (intake_token)
  WHERE intake_token IS NOT NULL;
ALTER TABLE sandglass_jobs SET (autovacuum_vacuum_scale_factor = 0.01,
                                autovacuum_vacuum_cost_delay = 0);

-- One row per node incarnation (a restarted node is a new owner: its old claims are not its).
-- Its lease: heartbeat_at, lease_ms, beating_since and lost (functions.sql, "Nodes and leases").
CREATE TABLE sandglass_nodes (
  owner           text        PRIMARY KEY,
  node            text        NOT NULL,
  workers         integer     NOT NULL,
  capacity        integer     NOT NULL,
  started_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  heartbeat_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  busy            integer     NOT NULL DEFAULT 0,  -- jobs the node holds (claimed, not ended)
  running_rest_us bigint      NOT NULL DEFAULT 0,  -- their expected rest at running_at
  running_at      timestamptz,
  lease_ms        bigint,                          -- NULL: a row no node wrote (none states a lease)
  beating_since   timestamptz NOT NULL DEFAULT clock_timestamp(),  -- since when without a gap
  lost            boolean     NOT NULL DEFAULT false,  -- a sweep judged it lost
  kinds           text[]                           -- the kinds it claims (NULL: every kind)
);

-- Cluster-wide admission reads these, never the jobs: per node and class, the queued jobs and
-- their estimated work. A node changes only its own rows (no contention between nodes); the
-- sums over all rows are exact because each change commits with the job's own change.
CREATE TABLE sandglass_counters (
  node     text     NOT NULL,
  priority smallint NOT NULL,
  queued   bigint   NOT NULL DEFAULT 0,
  work_us  bigint   NOT NULL DEFAULT 0,
  PRIMARY KEY (node, priority)
);

-- Whether a node's last claim came back short (functions.sql, "Hungry nodes"). A table of its
-- own, so that a claim waiting on a lock never holds the node row its heartbeat updates. Made
-- with the node's row (the trigger sandglass_hunger_row, functions.sql).
CREATE TABLE sandglass_hunger (
  owner  text    PRIMARY KEY REFERENCES sandglass_nodes (owner) ON DELETE CASCADE,
  hungry boolean NOT NULL DEFAULT true
);
