-- Counter rows of two writers per node and class (functions.sql, "Atomic admission"):
-- intake = true, the node's admissions (submissions and due delayed jobs), written only under
-- the admission lock; intake = false, everything else (claims, take-backs, the sweep's fold).
-- An admission holding the lock then never waits for a claim's counter row. Admission reads
-- the sums over all rows, as before.
ALTER TABLE sandglass_counters ADD COLUMN intake boolean NOT NULL DEFAULT false;
ALTER TABLE sandglass_counters DROP CONSTRAINT sandglass_counters_pkey;
ALTER TABLE sandglass_counters ADD PRIMARY KEY (node, priority, intake);
-- sandglass_count_classes takes which rows it changes (functions.sql has the new definition).
DROP FUNCTION IF EXISTS sandglass_count_classes(text, bigint[], bigint[]);
