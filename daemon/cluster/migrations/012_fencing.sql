-- 012_fencing.sql: a run's identity is (job id, attempt); a database outage is nobody's fault;
-- a node knows when it has lost its lease.
--
-- (id, attempt). A node that is taken back from may claim the same job again while its older
-- attempt still runs there. Both runs then ask for their commit points, possibly in one
-- statement: the answer names the runs marked, (id, attempt), so that the older run is refused
-- (daemon/cluster/commit_points.cpp). The take-back of claims whose answer was lost likewise
-- names the runs the node holds, so that a stale attempt held there does not hide the row's
-- newer one.
--
-- A lease. A node's row says when it last beat (heartbeat_at), how long its lease is
-- (lease_ms), since when it has beaten without a gap (beating_since) and whether a sweep has
-- judged it lost (lost). Only a sweep sets lost, and it takes back only lost owners' jobs (or
-- those of owners without a row): so a row that is not lost still holds all its running jobs,
-- whatever its heartbeat_at says, and its node's next beat is answered "alive". A beat of a
-- lost row is answered "lost": the node cancels what it holds and comes back as a new
-- incarnation (a new owner). The sweep's UPDATE and a beat's UPDATE of one row are serialised
-- by the row's lock, and each re-reads the row the other committed (READ COMMITTED): either the
-- beat comes first and the sweep finds it fresh, or the sweep comes first and the beat finds it
-- lost.
--
-- An outage is nobody's fault. While the database is down or unreachable, every node's lease
-- seems to lapse. A sweeper judges others only after it has itself beaten without a gap for a
-- whole lease since the server started (pg_postmaster_start_time) and since its own last gap: a
-- peer that is alive had that same lease to reconnect and beat (its beats are a heartbeat apart,
-- its reconnect back-off is shorter than the lease), so a peer still silent after it is not
-- alive, or cannot reach the database, which is the peer's own fault.
--
-- A claim requires the claimer's own fresh row (not lost, beaten within its lease): a node
-- whose lease may have lapsed claims nothing (its watchdog also stops it first,
-- daemon/cluster/node_lease.hpp).

ALTER TABLE sandglass_nodes
  ADD COLUMN lease_ms bigint,  -- NULL: a row no node wrote (none states a lease)
  ADD COLUMN beating_since timestamptz NOT NULL DEFAULT clock_timestamp(),
  ADD COLUMN lost boolean NOT NULL DEFAULT false;

DROP FUNCTION sandglass_record_commits(text, bigint[], integer[]);

-- Marks the commit points of the runs (p_ids[i], p_attempts[i]) of p_owner: only the current
-- owner's current attempt of a running job not asked to cancel. Returns the runs marked; the
-- node cancels the others (they are not its to commit). Marking twice is the same mark.
CREATE FUNCTION sandglass_record_commits(p_owner text, p_ids bigint[], p_attempts integer[])
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
    UPDATE sandglass_jobs j SET committed = true
      FROM unnest(p_ids, p_attempts) AS c(id, at)
     WHERE j.id = ANY (p_ids) AND j.id = c.id AND j.attempt = c.at
       AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running'
       AND NOT j.cancel_requested
    RETURNING j.id, j.attempt;
END $$;

-- The running rows of p_owner that are not among the runs (p_held[i], p_held_attempts[i]) it
-- still holds or has outcomes of not yet written are claims whose answer was lost: taken back
-- by the sweep's rule (sandglass_take_back). A row another transaction holds is waited for and
-- looked at again (007's reasons). Returns (requeued, lost).
CREATE FUNCTION sandglass_take_back_unheld(p_owner text, p_node text, p_held bigint[],
                                           p_held_attempts integer[], p_kinds text[],
                                           p_tail_us bigint[])
RETURNS TABLE (requeued integer, lost integer) LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  requeued := 0; lost := 0;
  FOR r IN
    SELECT j.id
      FROM sandglass_jobs j
     WHERE j.state = 'running' AND j.owner = p_owner
       AND NOT EXISTS (SELECT 1 FROM unnest(p_held, p_held_attempts) AS h(id, at)
                        WHERE h.id = j.id AND h.at = j.attempt)
     ORDER BY j.priority  -- counter rows in ascending class
       FOR UPDATE OF j
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

-- A beat of p_owner with its running work (006's busy and rest). True: alive, the row holds
-- all its jobs. False: lost (a sweep judged it so, or it has no row): it holds nothing any more.
-- A gap in the beats longer than the lease, or a server restart since the last beat, starts a
-- new run of beats (beating_since).
CREATE FUNCTION sandglass_beat(p_owner text, p_lease_ms bigint, p_busy integer,
                               p_running_rest_us bigint)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
  UPDATE sandglass_nodes n
     SET beating_since = CASE WHEN n.heartbeat_at < pg_postmaster_start_time()
                                OR n.heartbeat_at < v_now - p_lease_ms * interval '1 millisecond'
                              THEN v_now ELSE n.beating_since END,
         heartbeat_at = v_now, lease_ms = p_lease_ms, busy = p_busy,
         running_rest_us = p_running_rest_us, running_at = v_now
   WHERE n.owner = p_owner AND NOT n.lost;
  RETURN FOUND;
END $$;

-- The application_name of an incarnation's sessions: a sweep that judges it lost ends them (a
-- paused node's LISTEN session would hold back every node's notification queue; its other
-- sessions may hold locks). Names are cut to the server's 63 bytes.
CREATE FUNCTION sandglass_session_name(p_owner text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT left('sandglassd ' || p_owner, 63) $$;

-- The sweep, by p_owner. Nothing unless p_owner's own row is fresh and has beaten without a gap
-- for p_lease_ms since the server started (this file's header). Then every node silent for
-- longer than its lease (and p_lease_ms) is judged lost, and the running jobs of lost owners
-- and of owners without a row are taken back by 005's rule (sandglass_take_back). One sweeper
-- at a time; the others skip. The sessions of the owners judged lost are ended
-- (sandglass_session_name). Returns (requeued, lost) and those owners (lost_owners).
CREATE FUNCTION sandglass_sweep(p_owner text, p_node text, p_lease_ms bigint, p_kinds text[],
                                p_tail_us bigint[])
RETURNS TABLE (requeued integer, lost integer, lost_owners text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE r record; v_now timestamptz; v_since timestamptz;
  v_lease interval := p_lease_ms * interval '1 millisecond';
BEGIN
  requeued := 0; lost := 0; lost_owners := '{}';
  IF NOT pg_try_advisory_xact_lock(7170734562315111682) THEN RETURN NEXT; RETURN; END IF;
  v_now := clock_timestamp();  -- after the lock: the wait is not counted against anyone
  SELECT n.beating_since INTO v_since FROM sandglass_nodes n
   WHERE n.owner = p_owner AND NOT n.lost AND n.heartbeat_at > v_now - v_lease;
  IF v_since IS NULL OR v_since < pg_postmaster_start_time() OR v_since > v_now - v_lease THEN
    RETURN NEXT; RETURN;
  END IF;
  WITH judged AS (
    UPDATE sandglass_nodes n SET lost = true
     WHERE NOT n.lost
       AND n.heartbeat_at < v_now - greatest(p_lease_ms, coalesce(n.lease_ms, 0)) * interval '1 millisecond'
    RETURNING n.owner)
  SELECT coalesce(array_agg(j.owner), '{}') INTO lost_owners FROM judged j;
  IF cardinality(lost_owners) > 0 THEN
    PERFORM pg_terminate_backend(a.pid) FROM pg_stat_activity a
      WHERE a.application_name IN (SELECT sandglass_session_name(o) FROM unnest(lost_owners) AS o);
  END IF;
  FOR r IN
    SELECT j.id
      FROM sandglass_jobs j LEFT JOIN sandglass_nodes n ON n.owner = j.owner
     WHERE j.state = 'running' AND (n.owner IS NULL OR n.lost)
     ORDER BY j.priority  -- counter rows in ascending class, as everywhere (002_submit_many.sql)
       FOR UPDATE OF j SKIP LOCKED
  LOOP
    IF sandglass_take_back(p_node, r.id, p_kinds, p_tail_us, NULL) THEN
      requeued := requeued + 1;
    ELSE
      lost := lost + 1;
    END IF;
  END LOOP;
  DELETE FROM sandglass_nodes n WHERE n.heartbeat_at < v_now - interval '1 hour';
  RETURN NEXT;
END $$;

-- Whether p_owner may claim now: it has a row, not lost, that has beaten within its lease.
CREATE FUNCTION sandglass_holds_lease(p_owner text, p_now timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM sandglass_nodes n
                  WHERE n.owner = p_owner AND NOT n.lost
                    AND (n.lease_ms IS NULL
                         OR n.heartbeat_at > p_now - n.lease_ms * interval '1 millisecond'));
$$;

-- 009's claim rule, unchanged, but for the claimer's own lease, checked first.
CREATE OR REPLACE FUNCTION sandglass_claim(p_owner text, p_node text, p_limit integer,
                                           p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (job_id bigint, kind text, args text, priority smallint, attempt integer,
               remaining_us bigint, retired integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  r record; v_now timestamptz := clock_timestamp(); v_claimed integer := 0;
  v_retired integer := 0; v_seen integer; v_want integer;
  v_ids bigint[]; v_take boolean[]; v_left bigint[];
  v_dec bigint[] := ARRAY[0, 0, 0, 0]; v_decw bigint[] := ARRAY[0, 0, 0, 0];
  v_ended bigint[] := '{}'; v_ended_kinds text[] := '{}';
  v_hungry boolean; v_looked_again boolean := false;
BEGIN
  -- A claimer whose lease may have lapsed claims nothing (this file's header).
  IF p_limit > 0 AND NOT sandglass_holds_lease(p_owner, v_now) THEN RETURN; END IF;
  -- A hungry node's claim that would find nothing (009_hungry_nodes.sql, "Idle claims").
  IF p_limit > 0 THEN
    SELECT h.hungry INTO v_hungry FROM sandglass_hunger h WHERE h.owner = p_owner;
    IF v_hungry AND sandglass_nothing_to_claim(p_kinds, v_now) THEN RETURN; END IF;
  END IF;
  LOOP  -- a second pass only after this node became hungry (below)
  LOOP
    v_want := CASE WHEN p_limit = 0 THEN 256 ELSE p_limit - v_claimed END;
    -- The head, locked: claim order, SKIP LOCKED, no more rows than wanted.
    IF p_limit = 0 THEN
      SELECT array_agg(h.id), array_agg(false), array_agg(h.left_us)
        INTO v_ids, v_take, v_left
        FROM (SELECT j.id, floor(extract(epoch FROM (j.deadline - v_now)) * 1000000)::bigint AS left_us
                FROM sandglass_jobs j
               WHERE j.state = 'queued' AND j.deadline <= v_now
               ORDER BY j.priority, j.deadline
               LIMIT v_want
                 FOR UPDATE SKIP LOCKED) h;
    ELSE
      SELECT array_agg(h.id),
             array_agg(h.left_us > 0 AND h.left_us >= coalesce(p_tail_us[array_position(p_kinds, h.kind)], 0)),
             array_agg(h.left_us)
        INTO v_ids, v_take, v_left
        FROM (SELECT j.id, j.kind, floor(extract(epoch FROM (j.deadline - v_now)) * 1000000)::bigint AS left_us
                FROM sandglass_jobs j
               WHERE j.state = 'queued' AND (j.kind = ANY (p_kinds) OR j.deadline <= v_now)
               ORDER BY j.priority, j.deadline
               LIMIT v_want
                 FOR UPDATE SKIP LOCKED) h;
    END IF;
    v_seen := coalesce(cardinality(v_ids), 0);
    EXIT WHEN v_seen = 0;
    -- Claimed (attempt + 1, the fencing token) or retired, by id.
    FOR r IN
      UPDATE sandglass_jobs j
         SET state = CASE WHEN d.take THEN 'running' ELSE 'done' END,
             owner = CASE WHEN d.take THEN p_owner ELSE j.owner END,
             attempt = CASE WHEN d.take THEN j.attempt + 1 ELSE j.attempt END,
             claimed_at = CASE WHEN d.take THEN v_now ELSE j.claimed_at END,
             node_ran = CASE WHEN d.take THEN p_node ELSE j.node_ran END,
             outcome_state = CASE WHEN d.take THEN j.outcome_state ELSE 'expired' END,
             reason = CASE WHEN d.take THEN j.reason
                           WHEN d.left_us <= 0 THEN 'expired_in_queue' ELSE 'too_late_to_start' END,
             finished_at = CASE WHEN d.take THEN j.finished_at ELSE clock_timestamp() END
        FROM unnest(v_ids, v_take, v_left) AS d(id, take, left_us)
       WHERE j.id = ANY (v_ids) AND j.id = d.id
      RETURNING j.id AS id, j.kind AS k, j.args AS a, j.priority AS cl, j.attempt AS at,
                d.left_us AS left_us, j.work_us AS w, d.take AS take, j.awaited AS aw
    LOOP
      v_dec[r.cl + 1] := v_dec[r.cl + 1] + 1;
      v_decw[r.cl + 1] := v_decw[r.cl + 1] + r.w;
      IF r.take THEN
        v_claimed := v_claimed + 1;
        job_id := r.id; kind := r.k; args := r.a; priority := r.cl; attempt := r.at;
        remaining_us := r.left_us; retired := 0;
        RETURN NEXT;
      ELSE
        v_retired := v_retired + 1;
        IF r.aw THEN
          v_ended := v_ended || r.id;
          v_ended_kinds := v_ended_kinds || r.k;
        END IF;
      END IF;
    END LOOP;
    -- Retired rows left room: look again, unless the queue had no more.
    EXIT WHEN p_limit = 0 OR v_claimed >= p_limit OR v_seen < v_want;
  END LOOP;
    -- Hungry or not (009_hungry_nodes.sql). A limit of 0 (expired heads only) says nothing.
    EXIT WHEN p_limit = 0;
    IF v_claimed >= p_limit THEN
      UPDATE sandglass_hunger h SET hungry = false WHERE h.owner = p_owner AND h.hungry;
      EXIT;
    END IF;
    EXIT WHEN v_looked_again;
    SELECT h.hungry INTO v_hungry FROM sandglass_hunger h WHERE h.owner = p_owner;
    EXIT WHEN v_hungry IS NOT FALSE;  -- hungry already (or no row: this owner is not a node)
    -- Waits for the submissions that read hungry = false and have not committed; holds off
    -- the others until this commits (they then read true). The next pass's snapshot sees the
    -- rows of every one that committed before.
    PERFORM pg_advisory_xact_lock(7170734562315111683);
    UPDATE sandglass_hunger h SET hungry = true WHERE h.owner = p_owner;
    v_looked_again := true;
  END LOOP;
  IF v_dec <> ARRAY[0, 0, 0, 0]::bigint[] THEN
    PERFORM sandglass_count_classes(p_node, ARRAY[-v_dec[1], -v_dec[2], -v_dec[3], -v_dec[4]],
                                    ARRAY[-v_decw[1], -v_decw[2], -v_decw[3], -v_decw[4]]);
  END IF;
  IF cardinality(v_ended) > 0 THEN
    PERFORM sandglass_notify_outcomes(v_ended, v_ended_kinds, NULL);
  END IF;
  IF v_retired > 0 THEN
    job_id := NULL; kind := NULL; args := NULL; priority := NULL; attempt := NULL;
    remaining_us := NULL; retired := v_retired;
    RETURN NEXT;
  END IF;
END $$;

-- A node joins as incarnation p_owner of the name p_node, unless a live incarnation of that
-- name (not lost, beaten within its lease) holds it: then nothing is written and that owner is
-- returned (NULL: joined). Earlier incarnations of the name are gone (killed, restarted, or this
-- node's own lost one): judged lost here, so that a sweep takes back their jobs. Two joins of
-- one name are serialised by an advisory lock on the name.
CREATE FUNCTION sandglass_join(p_owner text, p_node text, p_workers integer, p_capacity integer,
                               p_lease_ms bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_live text; v_now timestamptz;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('sandglass_join ' || p_node, 0));
  v_now := clock_timestamp();
  SELECT n.owner INTO v_live FROM sandglass_nodes n
   WHERE n.node = p_node AND NOT n.lost
     AND n.heartbeat_at > v_now - greatest(p_lease_ms, coalesce(n.lease_ms, 0)) * interval '1 millisecond'
   LIMIT 1;
  IF FOUND THEN RETURN v_live; END IF;
  UPDATE sandglass_nodes n SET lost = true WHERE n.node = p_node AND NOT n.lost;
  INSERT INTO sandglass_nodes (owner, node, workers, capacity, lease_ms)
  VALUES (p_owner, p_node, p_workers, p_capacity, p_lease_ms);
  RETURN NULL;
END $$;
