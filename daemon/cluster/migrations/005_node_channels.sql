-- 005_node_channels.sql: NOTIFY per node, and functions applied only when they changed.
--
-- The names of the nodes that have a client waiting for a job (functions.sql, "Announced
-- outcomes"): its outcome is announced on those nodes' channels only. NULL on an awaited row:
-- no node was recorded, the outcome goes to the channel every node listens to.
ALTER TABLE sandglass_jobs ADD COLUMN awaited_by text[];

-- The md5 of the functions.sql last applied (migrations.cpp): a start whose file is the same
-- applies nothing, so it takes no lock a peer's heartbeat would wait for. One row.
CREATE TABLE sandglass_functions_applied (
  one      boolean PRIMARY KEY DEFAULT true CHECK (one),
  checksum text    NOT NULL
);

-- New argument lists (functions.sql defines the new ones; a fresh database has neither yet).
DROP FUNCTION IF EXISTS sandglass_notify_outcomes(bigint[], text[], bigint[]);
DROP FUNCTION IF EXISTS sandglass_await(bigint[]);
