-- 004_cluster_view.sql: what the cluster view needs (daemon/cluster/cluster_view.hpp).
--
-- The claimed jobs a node holds but has not started (claimed ahead, waiting in its local
-- queue), as its maintenance thread last reported them (sandglass_note_unstarted): only the
-- node knows when a worker takes a job, and a write per start would cost every job a row
-- update. The listing and /v1/stats show such a running row as "claimed".
ALTER TABLE sandglass_nodes ADD COLUMN unstarted bigint[] NOT NULL DEFAULT '{}';

-- sandglass_forget bounds the count of finished rows too (records.max_count): new arguments,
-- defined in functions.sql (applied after the numbered files; on a new database there is none
-- to drop yet).
DROP FUNCTION IF EXISTS sandglass_forget(bigint, integer);
