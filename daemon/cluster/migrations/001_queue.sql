-- 001_queue.sql: the shared queue of cluster mode (see daemon/cluster/cluster_node.hpp).
--
-- The database's clock is the only clock: a deadline is clock_timestamp() at insert plus the
-- budget left, and every decision that compares a deadline with "now" is taken here, in SQL, by
-- the same clock. Nodes only ever receive "remaining" durations.

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
  attempt          integer     NOT NULL DEFAULT 0,
  committed        boolean     NOT NULL DEFAULT false,
  cancel_requested boolean     NOT NULL DEFAULT false,
  claimed_at       timestamptz,
  finished_at      timestamptz,
  node_ran         text,                          -- the node name of the last claim
  outcome_state    text,
  reason           text,
  cause            text,
  result           text,
  error            text,
  run_us           bigint
);

CREATE UNIQUE INDEX sandglass_jobs_key ON sandglass_jobs (idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- The claim order: highest class first, earliest deadline first within a class.
CREATE INDEX sandglass_jobs_queue ON sandglass_jobs (priority, deadline) WHERE state = 'queued';
CREATE INDEX sandglass_jobs_running ON sandglass_jobs (owner) WHERE state = 'running';
ALTER TABLE sandglass_jobs SET (autovacuum_vacuum_scale_factor = 0.01,
                                autovacuum_vacuum_cost_delay = 0);

-- One row per node incarnation (a restarted node is a new owner: its old claims are not its).
CREATE TABLE sandglass_nodes (
  owner        text        PRIMARY KEY,
  node         text        NOT NULL,
  workers      integer     NOT NULL,
  capacity     integer     NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
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

CREATE FUNCTION sandglass_count(p_node text, p_priority smallint, p_queued bigint, p_work_us bigint)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO sandglass_counters AS c (node, priority, queued, work_us)
  VALUES (p_node, p_priority, p_queued, p_work_us)
  ON CONFLICT (node, priority) DO UPDATE
    SET queued = c.queued + EXCLUDED.queued, work_us = c.work_us + EXCLUDED.work_us;
$$;

-- Ends a job with an outcome decided in the database and tells the waiters.
CREATE FUNCTION sandglass_end(p_id bigint, p_kind text, p_state text, p_reason text, p_cause text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sandglass_jobs SET state = 'done', outcome_state = p_state, reason = p_reason,
         cause = p_cause, finished_at = clock_timestamp()
   WHERE id = p_id;
  PERFORM pg_notify('sandglass_outcome', p_id::text || ' ' || p_kind || ' -1');
END $$;

-- Admission and insert, in one transaction: the same order and reasons as a lone daemon
-- (queue_full, then deadline_implausible), with the work ahead read from the counters.
-- verdict: admitted, attached (a keyed job that exists with the same fingerprint), conflict,
-- queue_full, deadline_implausible.
CREATE FUNCTION sandglass_submit(p_node text, p_kind text, p_args text, p_priority smallint,
                                 p_key text, p_fingerprint text, p_remaining_us bigint,
                                 p_budget_us bigint, p_work_us bigint, p_tail_us bigint,
                                 p_lease_ms bigint)
RETURNS TABLE (job_id bigint, verdict text) LANGUAGE plpgsql AS $$
DECLARE
  v_id bigint; v_fp text; v_queued bigint; v_work bigint; v_workers bigint; v_capacity bigint;
BEGIN
  IF p_key IS NOT NULL THEN
    SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_key;
    IF FOUND THEN
      RETURN QUERY SELECT v_id, CASE WHEN v_fp = p_fingerprint THEN 'attached' ELSE 'conflict' END;
      RETURN;
    END IF;
  END IF;
  SELECT coalesce(sum(c.queued), 0), coalesce(sum(c.work_us) FILTER (WHERE c.priority <= p_priority), 0)
    INTO v_queued, v_work FROM sandglass_counters c;
  SELECT coalesce(sum(n.workers), 0), coalesce(sum(n.capacity), 0) INTO v_workers, v_capacity
    FROM sandglass_nodes n
   WHERE n.heartbeat_at > clock_timestamp() - p_lease_ms * interval '1 millisecond';
  IF v_capacity > 0 AND v_queued >= v_capacity THEN
    RETURN QUERY SELECT NULL::bigint, 'queue_full'; RETURN;
  END IF;
  IF p_tail_us > 0 AND v_workers > 0 AND v_work / v_workers + p_tail_us > p_remaining_us THEN
    RETURN QUERY SELECT NULL::bigint, 'deadline_implausible'; RETURN;
  END IF;
  INSERT INTO sandglass_jobs (kind, args, priority, idempotency_key, fingerprint, budget_us,
                              work_us, deadline)
  VALUES (p_kind, p_args, p_priority, p_key, p_fingerprint, p_budget_us, p_work_us,
          clock_timestamp() + p_remaining_us * interval '1 microsecond')
  ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING id INTO v_id;
  IF v_id IS NULL THEN  -- another node inserted this key since the check above
    SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_key;
    RETURN QUERY SELECT v_id, CASE WHEN v_fp = p_fingerprint THEN 'attached' ELSE 'conflict' END;
    RETURN;
  END IF;
  PERFORM sandglass_count(p_node, p_priority, 1, p_work_us);
  PERFORM pg_notify('sandglass_queued', p_kind);
  RETURN QUERY SELECT v_id, 'admitted';
END $$;

-- The claim rule. Walks the queue in claim order (class, then deadline) with SKIP LOCKED, so
-- claimers never wait for each other, and for each row: past its deadline -> ended
-- expired_in_queue (any kind: someone must); less time left than the kind's tail estimate ->
-- ended too_late_to_start; else claimed, with attempt + 1 (the fencing token) and the time it
-- has left by this clock. Rows of kinds this node does not serve are never locked (unless
-- expired). It locks no more rows than it claims or retires, so concurrent claimers skip only
-- what is really taken. With p_limit 0 it only retires expired heads (the heartbeat's call).
CREATE FUNCTION sandglass_claim(p_owner text, p_node text, p_limit integer, p_kinds text[],
                                p_tail_us bigint[])
RETURNS TABLE (job_id bigint, kind text, args text, priority smallint, attempt integer,
               remaining_us bigint, retired integer)
LANGUAGE plpgsql AS $$
DECLARE
  r record; v_now timestamptz := clock_timestamp(); v_claimed integer := 0;
  v_retired integer := 0; v_seen integer; v_want integer; v_est bigint; v_left bigint;
  v_dec bigint[] := ARRAY[0, 0, 0, 0]; v_decw bigint[] := ARRAY[0, 0, 0, 0];
BEGIN
  IF p_limit = 0 THEN
    FOR r IN
      SELECT j.id, j.kind, j.priority, j.work_us FROM sandglass_jobs j
       WHERE j.state = 'queued' AND j.deadline <= v_now
       ORDER BY j.priority, j.deadline LIMIT 256 FOR UPDATE SKIP LOCKED
    LOOP
      v_dec[r.priority + 1] := v_dec[r.priority + 1] + 1;
      v_decw[r.priority + 1] := v_decw[r.priority + 1] + r.work_us;
      PERFORM sandglass_end(r.id, r.kind, 'expired', 'expired_in_queue', NULL);
      v_retired := v_retired + 1;
    END LOOP;
  END IF;
  WHILE p_limit > 0 LOOP
    v_seen := 0;
    v_want := p_limit - v_claimed;
    FOR r IN
      SELECT j.id, j.kind, j.args, j.priority, j.attempt, j.deadline, j.work_us
        FROM sandglass_jobs j
       WHERE j.state = 'queued' AND (j.kind = ANY (p_kinds) OR j.deadline <= v_now)
       ORDER BY j.priority, j.deadline
       LIMIT v_want
         FOR UPDATE SKIP LOCKED
    LOOP
      v_seen := v_seen + 1;
      v_dec[r.priority + 1] := v_dec[r.priority + 1] + 1;
      v_decw[r.priority + 1] := v_decw[r.priority + 1] + r.work_us;
      v_left := floor(extract(epoch FROM (r.deadline - v_now)) * 1000000)::bigint;
      v_est := coalesce(p_tail_us[array_position(p_kinds, r.kind)], 0);
      IF v_left <= 0 THEN
        PERFORM sandglass_end(r.id, r.kind, 'expired', 'expired_in_queue', NULL);
        v_retired := v_retired + 1;
      ELSIF v_left < v_est THEN
        PERFORM sandglass_end(r.id, r.kind, 'expired', 'too_late_to_start', NULL);
        v_retired := v_retired + 1;
      ELSE
        UPDATE sandglass_jobs j SET state = 'running', owner = p_owner, attempt = j.attempt + 1,
               claimed_at = v_now, node_ran = p_node
         WHERE j.id = r.id;
        v_claimed := v_claimed + 1;
        job_id := r.id; kind := r.kind; args := r.args; priority := r.priority;
        attempt := r.attempt + 1; remaining_us := v_left; retired := 0;
        RETURN NEXT;
      END IF;
    END LOOP;
    -- Retired rows left room: look again, unless the queue had no more.
    EXIT WHEN v_claimed >= p_limit OR v_seen < v_want;
  END LOOP;
  FOR i IN 1..4 LOOP
    IF v_dec[i] <> 0 THEN
      PERFORM sandglass_count(p_node, (i - 1)::smallint, -v_dec[i], -v_decw[i]);
    END IF;
  END LOOP;
  IF v_retired > 0 THEN
    job_id := NULL; kind := NULL; args := NULL; priority := NULL; attempt := NULL;
    remaining_us := NULL; retired := v_retired;
    RETURN NEXT;
  END IF;
END $$;

-- Outcomes with fencing: written only while the job is still running under this owner and
-- attempt. Returns the ids written; the others were stale (the job was taken back or ended).
CREATE FUNCTION sandglass_finish(p_owner text, p_ids bigint[], p_attempts integer[],
                                 p_states text[], p_reasons text[], p_causes text[],
                                 p_committed boolean[], p_results text[], p_errors text[],
                                 p_run_us bigint[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN
    UPDATE sandglass_jobs j
       SET state = 'done', outcome_state = o.st, reason = o.re, cause = o.ca,
           committed = j.committed OR o.co, result = o.rs, error = o.er, run_us = o.ru,
           finished_at = clock_timestamp()
      FROM unnest(p_ids, p_attempts, p_states, p_reasons, p_causes, p_committed, p_results,
                  p_errors, p_run_us) AS o(id, at, st, re, ca, co, rs, er, ru)
     WHERE j.id = o.id AND j.attempt = o.at AND j.owner = p_owner AND j.state = 'running'
    RETURNING j.id, j.kind, o.ru
  LOOP
    PERFORM pg_notify('sandglass_outcome', r.id::text || ' ' || r.kind || ' ' || r.ru::text);
    RETURN NEXT r.id;
  END LOOP;
END $$;

-- DELETE /v1/jobs/ID: a queued job ends at once (cancelled_in_queue, cause caller); a running
-- one is marked and its owner told on the cancel channel.
CREATE FUNCTION sandglass_cancel(p_node text, p_id bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  SELECT j.state, j.owner, j.kind, j.priority, j.work_us INTO r
    FROM sandglass_jobs j WHERE j.id = p_id FOR UPDATE;
  IF NOT FOUND THEN RETURN 'unknown'; END IF;
  IF r.state = 'queued' THEN
    PERFORM sandglass_count(p_node, r.priority, -1, -r.work_us);
    PERFORM sandglass_end(p_id, r.kind, 'cancelled', 'cancelled_in_queue', 'caller');
    RETURN 'ended';
  ELSIF r.state = 'running' THEN
    UPDATE sandglass_jobs SET cancel_requested = true WHERE id = p_id;
    PERFORM pg_notify('sandglass_cancel', p_id::text || ' ' || r.owner);
    RETURN 'signalled';
  END IF;
  RETURN 'over';
END $$;

-- A node is alive; it also records the commit points its running jobs passed since.
CREATE FUNCTION sandglass_heartbeat(p_owner text, p_committed bigint[], p_attempts integer[])
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sandglass_jobs j SET committed = true
    FROM unnest(p_committed, p_attempts) AS c(id, at)
   WHERE j.id = c.id AND j.attempt = c.at AND j.owner = p_owner AND j.state = 'running';
  UPDATE sandglass_nodes SET heartbeat_at = clock_timestamp() WHERE owner = p_owner;
  RETURN FOUND;
END $$;

-- Takes back the running jobs of nodes silent for longer than the lease (one sweeper at a time;
-- the others skip). A job that has not passed its commit point, was not asked to cancel, and
-- has more time left than its kind's tail estimate is queued again (the next claim makes it
-- attempt + 1); any other ends failed, node_lost. Returns (requeued, lost).
CREATE FUNCTION sandglass_sweep(p_node text, p_lease_ms bigint, p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (requeued integer, lost integer) LANGUAGE plpgsql AS $$
DECLARE
  r record; v_now timestamptz := clock_timestamp(); v_left bigint; v_est bigint;
BEGIN
  requeued := 0; lost := 0;
  IF NOT pg_try_advisory_xact_lock(7170734562315111682) THEN RETURN NEXT; RETURN; END IF;
  FOR r IN
    SELECT j.id, j.kind, j.priority, j.deadline, j.committed, j.cancel_requested, j.work_us
      FROM sandglass_jobs j LEFT JOIN sandglass_nodes n ON n.owner = j.owner
     WHERE j.state = 'running'
       AND (n.owner IS NULL OR n.heartbeat_at < v_now - p_lease_ms * interval '1 millisecond')
     ORDER BY j.priority  -- counter rows in ascending class, as everywhere (002_submit_many.sql)
       FOR UPDATE OF j SKIP LOCKED
  LOOP
    v_left := floor(extract(epoch FROM (r.deadline - v_now)) * 1000000)::bigint;
    v_est := coalesce(p_tail_us[array_position(p_kinds, r.kind)], 0);
    IF NOT r.committed AND NOT r.cancel_requested AND v_left > 0 AND v_left > v_est THEN
      UPDATE sandglass_jobs SET state = 'queued', owner = NULL WHERE id = r.id;
      PERFORM sandglass_count(p_node, r.priority, 1, r.work_us);
      PERFORM pg_notify('sandglass_queued', r.kind);
      requeued := requeued + 1;
    ELSE
      PERFORM sandglass_end(r.id, r.kind, 'failed', 'node_lost', NULL);
      lost := lost + 1;
    END IF;
  END LOOP;
  DELETE FROM sandglass_nodes WHERE heartbeat_at < v_now - interval '1 hour';
  RETURN NEXT;
END $$;
