-- 010_forget_records.sql: a cluster forgets finished job records, as a lone daemon does.
--
-- Why. Until now a row of sandglass_jobs stayed forever once its job was done: at 5,000 jobs
-- a second, 430 million rows a day. Each autovacuum of the table then reads more of it, and the
-- claims step measured the vacuum of this table as the source of its paced p99
-- (bench/results/cluster-claims-stop33.txt). A lone daemon keeps a finished record for
-- records.keep_ms; a cluster node now deletes the rows of jobs that finished longer ago than
-- that (by the database's clock, like every time here), so GET answers 404 for them on every
-- node, and an idempotency key of such a job is free again, as on a lone daemon.
--
-- The rule. sandglass_forget(keep, limit) deletes at most `limit` rows that are done and
-- finished before clock_timestamp() - keep. A queued or running row is never deleted. It walks
-- the table in id order from the oldest row and stops at the first row created after that
-- instant (a later id was created later, up to the few ms between an id's allocation and its
-- insert: a row missed so goes with a later call), so a call reads the rows it deletes and the
-- old rows still live or recently finished, never the whole table, and needs no index of its
-- own (an index on finished_at would cost every outcome's write one more insert).
-- Several nodes may call it at once: a row that two calls picked is deleted by one, the other
-- finds it gone (its DELETE re-checks the row).

CREATE FUNCTION sandglass_forget(p_keep_ms bigint, p_limit integer)
RETURNS integer LANGUAGE plpgsql SET enable_seqscan = off SET enable_sort = off AS $$
DECLARE
  v_before timestamptz := clock_timestamp() - p_keep_ms * interval '1 millisecond';
  v_ids bigint[] := '{}'; r record; v_deleted integer;
BEGIN
  FOR r IN SELECT j.id, j.state, j.created_at, j.finished_at FROM sandglass_jobs j ORDER BY j.id LOOP
    EXIT WHEN r.created_at >= v_before OR cardinality(v_ids) >= p_limit;
    IF r.state = 'done' AND coalesce(r.finished_at, r.created_at) < v_before THEN v_ids := v_ids || r.id; END IF;
  END LOOP;
  IF cardinality(v_ids) = 0 THEN RETURN 0; END IF;
  DELETE FROM sandglass_jobs j
   WHERE j.id = ANY (v_ids) AND j.state = 'done' AND coalesce(j.finished_at, j.created_at) < v_before;
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;
