-- 005_take_back.sql: a node takes back the claims whose answer it lost.
--
-- A claim (sandglass_finish_claim, or sandglass_submit_claim's claims at insert) can commit
-- while its answer never reaches the node: the connection drops between the commit and the
-- reply. Those rows stay running under a live owner whose heartbeat keeps the lease, and no
-- sweep would ever take them back. So a node that reconnects after a failed claiming statement
-- names every job it still holds (running here, or its outcome not yet written) and gives back
-- the rest of its running rows by the same rule as the sweep of a lost node.
--
-- The rule lives in one place, sandglass_take_back; sandglass_sweep (001) is restated here only
-- to call it, with the same signature and meaning, so 003 and 004 nodes sharing the database
-- in a rolling upgrade sweep exactly as before.

-- Takes back one running row, which the caller has locked: queued again (the next claim makes
-- it attempt + 1) when it has not passed its commit point, was not asked to cancel, and has
-- more time left than its kind's tail estimate; otherwise it ends failed, node_lost, with
-- p_error (NULL: none). Counter rows are the caller's to order (ascending class). True when
-- queued again.
CREATE FUNCTION sandglass_take_back(p_node text, p_id bigint, p_kinds text[], p_tail_us bigint[],
                                    p_error text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE r record; v_left bigint; v_est bigint;
BEGIN
  SELECT j.kind, j.priority, j.deadline, j.committed, j.cancel_requested, j.work_us INTO r
    FROM sandglass_jobs j WHERE j.id = p_id;
  v_left := floor(extract(epoch FROM (r.deadline - clock_timestamp())) * 1000000)::bigint;
  v_est := coalesce(p_tail_us[array_position(p_kinds, r.kind)], 0);
  IF NOT r.committed AND NOT r.cancel_requested AND v_left > 0 AND v_left > v_est THEN
    UPDATE sandglass_jobs SET state = 'queued', owner = NULL WHERE id = p_id;
    PERFORM sandglass_count(p_node, r.priority, 1, r.work_us);
    PERFORM pg_notify('sandglass_queued', r.kind);
    RETURN true;
  END IF;
  IF p_error IS NOT NULL THEN UPDATE sandglass_jobs SET error = p_error WHERE id = p_id; END IF;
  PERFORM sandglass_end(p_id, r.kind, 'failed', 'node_lost', NULL);
  RETURN false;
END $$;

CREATE OR REPLACE FUNCTION sandglass_sweep(p_node text, p_lease_ms bigint, p_kinds text[],
                                           p_tail_us bigint[])
RETURNS TABLE (requeued integer, lost integer) LANGUAGE plpgsql AS $$
DECLARE r record; v_now timestamptz := clock_timestamp();
BEGIN
  requeued := 0; lost := 0;
  IF NOT pg_try_advisory_xact_lock(7170734562315111682) THEN RETURN NEXT; RETURN; END IF;
  FOR r IN
    SELECT j.id
      FROM sandglass_jobs j LEFT JOIN sandglass_nodes n ON n.owner = j.owner
     WHERE j.state = 'running'
       AND (n.owner IS NULL OR n.heartbeat_at < v_now - p_lease_ms * interval '1 millisecond')
     ORDER BY j.priority  -- counter rows in ascending class, as everywhere (002_submit_many.sql)
       FOR UPDATE OF j SKIP LOCKED
  LOOP
    IF sandglass_take_back(p_node, r.id, p_kinds, p_tail_us, NULL) THEN
      requeued := requeued + 1;
    ELSE
      lost := lost + 1;
    END IF;
  END LOOP;
  DELETE FROM sandglass_nodes WHERE heartbeat_at < v_now - interval '1 hour';
  RETURN NEXT;
END $$;

-- The running rows of p_owner that are not in p_held (the jobs the node still runs or has
-- outcomes of not yet written) are claims whose answer was lost: taken back. The caller runs
-- no claim of its own meanwhile, so every claim of p_owner that committed and reached it is in
-- p_held. Fenced by owner and state; a row another transaction holds is skipped (it is not
-- p_owner's for long: a sweep or a cancel). Returns (requeued, lost).
CREATE FUNCTION sandglass_take_back_unheld(p_owner text, p_node text, p_held bigint[],
                                           p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (requeued integer, lost integer) LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  requeued := 0; lost := 0;
  FOR r IN
    SELECT j.id
      FROM sandglass_jobs j
     WHERE j.state = 'running' AND j.owner = p_owner AND NOT (j.id = ANY (p_held))
     ORDER BY j.priority  -- counter rows in ascending class
       FOR UPDATE OF j SKIP LOCKED
  LOOP
    IF sandglass_take_back(p_node, r.id, p_kinds, p_tail_us,
                           'claimed by ' || p_owner || ', whose answer was lost before it started') THEN
      requeued := requeued + 1;
    ELSE
      lost := lost + 1;
    END IF;
  END LOOP;
  RETURN NEXT;
END $$;
