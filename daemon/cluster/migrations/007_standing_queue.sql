-- 007_standing_queue.sql: the standing-queue rule in the cluster (functions.sql, "Admission and
-- intake", the standing-queue rule).
--
-- A node's own detector (daemon/cluster/claimer.cpp) says whether the queue it claims from
-- stands; its beat reports the target delay while one stands, 0 while none does.
ALTER TABLE sandglass_nodes ADD COLUMN standing_target_us bigint NOT NULL DEFAULT 0;

-- New arguments (a beat's standing target) and result columns (how long a claimed job waited
-- in the queue): the old definitions go, functions.sql makes the new ones.
DROP FUNCTION IF EXISTS sandglass_beat(text, bigint, integer, bigint);
DROP FUNCTION IF EXISTS sandglass_finish_claim(text, text, bigint[], integer[], text[], text[],
                                               text[], boolean[], text[], text[], bigint[],
                                               integer, text[], bigint[], boolean, text[], text[]);
DROP FUNCTION IF EXISTS sandglass_claim(text, text, integer, text[], bigint[]);
