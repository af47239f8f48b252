-- 003_batched.sql: the same rules as 001 and 002, with fewer statements per job.
--
-- - Submissions: the counters and the live nodes are read once per batch, each job is admitted
--   against what the batch admitted before it (as 002 did, job by job), the unkeyed jobs are
--   inserted by one INSERT, the counters change once per class, one NOTIFY per kind.
-- - Claims: the head rows are locked and claimed (or retired) by one UPDATE per pass instead of
--   one per row. The claim rule itself is unchanged (see 001_queue.sql).
-- - Outcomes: one UPDATE writes a batch with the same fencing as before, and the waiters learn
--   of a batch by as few NOTIFYs as the payload limit allows (sandglass_notify_outcomes).
--
-- The outcome channel's payload is now one or more lines "ID KIND RUN_US" (RUN_US -1: the job
-- never ran), separated by newlines; one line is what 001 sent.

-- Outcomes and commit points are written by id. The index of running rows by owner (001) holds,
-- until vacuum, an entry for every job the owner ever ran, and with a queue table's stale
-- statistics the planner walked it for each batch of outcomes instead of looking up the ids
-- (7.5 ms per batch, measured). So those statements test the owner and the state with IS NOT
-- DISTINCT FROM, which no index serves (neither is NULL on a running row: the same test as =),
-- and name the ids with = ANY, which the primary key serves. The sweep keeps the index.

-- Changes a node's counters of all four classes by p_queued[class + 1] jobs and p_work_us[...]
-- work in one statement, taking the rows in ascending class (as every transaction that holds
-- several of them does: no deadlock). A plpgsql statement, so its plan is cached per session
-- (a call of the SQL function sandglass_count is planned again every time: 0.36 ms).
CREATE FUNCTION sandglass_count_classes(p_node text, p_queued bigint[], p_work_us bigint[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sandglass_counters AS c (node, priority, queued, work_us)
  SELECT p_node, (k - 1)::smallint, p_queued[k], p_work_us[k]
    FROM generate_series(1, 4) AS k
   WHERE p_queued[k] <> 0 OR p_work_us[k] <> 0
   ORDER BY k
  ON CONFLICT (node, priority) DO UPDATE
    SET queued = c.queued + EXCLUDED.queued, work_us = c.work_us + EXCLUDED.work_us;
END $$;

-- Tells the waiters of every node that these jobs ended: one NOTIFY per about 7,900 bytes of
-- payload (PostgreSQL refuses payloads of 8,000 bytes). A kind's newlines become spaces and it
-- is cut at 200 characters, so a line always fits.
CREATE FUNCTION sandglass_notify_outcomes(p_ids bigint[], p_kinds text[], p_run_us bigint[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_payload text := ''; v_line text;
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
    v_line := p_ids[i]::text || ' ' || left(translate(p_kinds[i], E'\n\r', '  '), 200) || ' '
              || coalesce(p_run_us[i], -1)::text;
    IF v_payload <> '' AND octet_length(v_payload) + octet_length(v_line) >= 7900 THEN
      PERFORM pg_notify('sandglass_outcome', v_payload);
      v_payload := '';
    END IF;
    v_payload := CASE WHEN v_payload = '' THEN v_line ELSE v_payload || E'\n' || v_line END;
  END LOOP;
  IF v_payload <> '' THEN PERFORM pg_notify('sandglass_outcome', v_payload); END IF;
END $$;

-- Admission and insert of many submissions (see 002_submit_many.sql for the order and the
-- reasons). The work ahead and the queued count are read once and then carried through the
-- batch, so each job sees the ones admitted before it.
CREATE OR REPLACE FUNCTION sandglass_submit_many(p_node text, p_kinds text[], p_args text[],
                                                 p_priorities smallint[], p_keys text[],
                                                 p_fingerprints text[], p_remaining_us bigint[],
                                                 p_budget_us bigint[], p_work_us bigint[],
                                                 p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer; v_class integer; v_id bigint; v_fp text; v_queued bigint; v_workers bigint;
  v_capacity bigint; v_ahead bigint;
  v_work bigint[] := ARRAY[0, 0, 0, 0];   -- queued work per class (index class + 1)
  v_add bigint[] := ARRAY[0, 0, 0, 0]; v_addw bigint[] := ARRAY[0, 0, 0, 0];
  v_new integer[] := '{}'; v_new_ids bigint[] := '{}'; v_kinds text[] := '{}';
  c record;
BEGIN
  SELECT coalesce(sum(sc.queued), 0) INTO v_queued FROM sandglass_counters sc;
  FOR c IN SELECT sc.priority AS cl, sum(sc.work_us) AS w FROM sandglass_counters sc GROUP BY sc.priority LOOP
    IF c.cl BETWEEN 0 AND 3 THEN v_work[c.cl + 1] := c.w; END IF;
  END LOOP;
  SELECT coalesce(sum(n.workers), 0), coalesce(sum(n.capacity), 0) INTO v_workers, v_capacity
    FROM sandglass_nodes n
   WHERE n.heartbeat_at > clock_timestamp() - p_lease_ms * interval '1 millisecond';
  FOR i IN
    SELECT o.n FROM unnest(p_priorities) WITH ORDINALITY AS o(pr, n) ORDER BY o.pr, o.n
  LOOP
    v_class := p_priorities[i] + 1;
    ord := i;
    IF p_keys[i] IS NOT NULL THEN
      SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_keys[i];
      IF FOUND THEN
        job_id := v_id;
        verdict := CASE WHEN v_fp = p_fingerprints[i] THEN 'attached' ELSE 'conflict' END;
        RETURN NEXT;
        CONTINUE;
      END IF;
    END IF;
    IF v_capacity > 0 AND v_queued >= v_capacity THEN
      job_id := NULL; verdict := 'queue_full'; RETURN NEXT; CONTINUE;
    END IF;
    v_ahead := 0;
    FOR k IN 1 .. v_class LOOP v_ahead := v_ahead + v_work[k]; END LOOP;
    IF p_tail_us[i] > 0 AND v_workers > 0 AND v_ahead / v_workers + p_tail_us[i] > p_remaining_us[i] THEN
      job_id := NULL; verdict := 'deadline_implausible'; RETURN NEXT; CONTINUE;
    END IF;
    IF p_keys[i] IS NOT NULL THEN
      v_id := NULL;
      INSERT INTO sandglass_jobs (kind, args, priority, idempotency_key, fingerprint, budget_us,
                                  work_us, deadline)
      VALUES (p_kinds[i], p_args[i], p_priorities[i], p_keys[i], p_fingerprints[i], p_budget_us[i],
              p_work_us[i], clock_timestamp() + p_remaining_us[i] * interval '1 microsecond')
      ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING id INTO v_id;
      IF v_id IS NULL THEN  -- another node inserted this key since the check above
        SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_keys[i];
        job_id := v_id;
        verdict := CASE WHEN v_fp = p_fingerprints[i] THEN 'attached' ELSE 'conflict' END;
        RETURN NEXT;
        CONTINUE;
      END IF;
    ELSE
      v_id := nextval('sandglass_jobs_id_seq');
      v_new := v_new || i;
      v_new_ids := v_new_ids || v_id;
    END IF;
    v_queued := v_queued + 1;
    v_work[v_class] := v_work[v_class] + p_work_us[i];
    v_add[v_class] := v_add[v_class] + 1;
    v_addw[v_class] := v_addw[v_class] + p_work_us[i];
    IF NOT (p_kinds[i] = ANY (v_kinds)) THEN v_kinds := v_kinds || p_kinds[i]; END IF;
    job_id := v_id; verdict := 'admitted';
    RETURN NEXT;
  END LOOP;
  INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         clock_timestamp() + p_remaining_us[u.o] * interval '1 microsecond'
    FROM unnest(v_new, v_new_ids) AS u(o, id);
  PERFORM sandglass_count_classes(p_node, v_add, v_addw);
  PERFORM pg_notify('sandglass_queued', kn.name) FROM unnest(v_kinds) AS kn(name);
END $$;

-- The claim rule of 001_queue.sql (class then deadline, SKIP LOCKED, at most p_limit claimed,
-- head rows that can no longer finish retired; p_limit 0 only retires expired heads), with
-- one UPDATE per pass over the head instead of one per row.
CREATE OR REPLACE FUNCTION sandglass_claim(p_owner text, p_node text, p_limit integer,
                                           p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (job_id bigint, kind text, args text, priority smallint, attempt integer,
               remaining_us bigint, retired integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r record; v_now timestamptz := clock_timestamp(); v_claimed integer := 0;
  v_retired integer := 0; v_seen integer; v_seen_all integer := 0; v_want integer;
  v_dec bigint[] := ARRAY[0, 0, 0, 0]; v_decw bigint[] := ARRAY[0, 0, 0, 0];
  v_ended bigint[] := '{}'; v_ended_kinds text[] := '{}';
BEGIN
  LOOP
    v_seen := 0;
    v_want := CASE WHEN p_limit = 0 THEN 256 ELSE p_limit - v_claimed END;
    FOR r IN
      WITH head AS (
        SELECT j.id, j.priority AS cl, j.work_us AS w,
               floor(extract(epoch FROM (j.deadline - v_now)) * 1000000)::bigint AS left_us,
               coalesce(p_tail_us[array_position(p_kinds, j.kind)], 0) AS est
          FROM sandglass_jobs j
         WHERE j.state = 'queued'
           AND CASE WHEN p_limit = 0 THEN j.deadline <= v_now
                    ELSE j.kind = ANY (p_kinds) OR j.deadline <= v_now END
         ORDER BY j.priority, j.deadline
         LIMIT v_want
           FOR UPDATE SKIP LOCKED),
      decided AS (
        SELECT h.*, h.left_us > 0 AND h.left_us >= h.est AND p_limit > 0 AS take FROM head h)
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
        FROM decided d
       WHERE j.id = d.id
      RETURNING j.id AS id, j.kind AS k, j.args AS a, j.priority AS cl, j.attempt AS at,
                d.left_us AS left_us, d.w AS w, d.take AS take
    LOOP
      v_seen := v_seen + 1;
      v_seen_all := v_seen_all + 1;
      v_dec[r.cl + 1] := v_dec[r.cl + 1] + 1;
      v_decw[r.cl + 1] := v_decw[r.cl + 1] + r.w;
      IF r.take THEN
        v_claimed := v_claimed + 1;
        job_id := r.id; kind := r.k; args := r.a; priority := r.cl; attempt := r.at;
        remaining_us := r.left_us; retired := 0;
        RETURN NEXT;
      ELSE
        v_retired := v_retired + 1;
        v_ended := v_ended || r.id;
        v_ended_kinds := v_ended_kinds || r.k;
      END IF;
    END LOOP;
    -- Retired rows left room: look again, unless the queue had no more.
    EXIT WHEN p_limit = 0 OR v_claimed >= p_limit OR v_seen < v_want;
  END LOOP;
  IF v_seen_all > 0 THEN
    PERFORM sandglass_count_classes(p_node, ARRAY[-v_dec[1], -v_dec[2], -v_dec[3], -v_dec[4]],
                                    ARRAY[-v_decw[1], -v_decw[2], -v_decw[3], -v_decw[4]]);
  END IF;
  IF v_retired > 0 THEN
    PERFORM sandglass_notify_outcomes(v_ended, v_ended_kinds, NULL);
    job_id := NULL; kind := NULL; args := NULL; priority := NULL; attempt := NULL;
    remaining_us := NULL; retired := v_retired;
    RETURN NEXT;
  END IF;
END $$;

-- Outcomes with fencing, as in 001_queue.sql: written only while the job is still running
-- under this owner and attempt. Returns the ids written; the others were stale.
CREATE OR REPLACE FUNCTION sandglass_finish(p_owner text, p_ids bigint[], p_attempts integer[],
                                            p_states text[], p_reasons text[], p_causes text[],
                                            p_committed boolean[], p_results text[],
                                            p_errors text[], p_run_us bigint[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE v_ids bigint[]; v_kinds text[]; v_run bigint[];
BEGIN
  WITH written AS (
    UPDATE sandglass_jobs j
       SET state = 'done', outcome_state = o.st, reason = o.re, cause = o.ca,
           committed = j.committed OR o.co, result = o.rs, error = o.er, run_us = o.ru,
           finished_at = clock_timestamp()
      FROM unnest(p_ids, p_attempts, p_states, p_reasons, p_causes, p_committed, p_results,
                  p_errors, p_run_us) AS o(id, at, st, re, ca, co, rs, er, ru)
     WHERE j.id = ANY (p_ids) AND j.id = o.id AND j.attempt = o.at
       AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running'
    RETURNING j.id, j.kind, o.ru)
  SELECT array_agg(w.id), array_agg(w.kind), array_agg(w.ru) INTO v_ids, v_kinds, v_run FROM written w;
  IF v_ids IS NULL THEN RETURN; END IF;
  PERFORM sandglass_notify_outcomes(v_ids, v_kinds, v_run);
  RETURN QUERY SELECT unnest(v_ids);
END $$;

-- A node is alive; it also records the commit points its running jobs passed since (001's,
-- with the ids looked up by the primary key: see sandglass_finish).
CREATE OR REPLACE FUNCTION sandglass_heartbeat(p_owner text, p_committed bigint[], p_attempts integer[])
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(p_committed) > 0 THEN
    UPDATE sandglass_jobs j SET committed = true
      FROM unnest(p_committed, p_attempts) AS c(id, at)
     WHERE j.id = ANY (p_committed) AND j.id = c.id AND j.attempt = c.at
       AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running';
  END IF;
  UPDATE sandglass_nodes SET heartbeat_at = clock_timestamp() WHERE owner = p_owner;
  RETURN FOUND;
END $$;
