-- EXPERIMENT, NOT A MIGRATION (bench/results/cluster-notify-lock.txt): the sandglass_finish_claim
-- measured there as "008", applied by hand on top of 001-007 (psql -f). It saved about 10 % of the
-- database's CPU per exchange in one session and did not move the bench's claim latency or
-- throughput, so it was not added to daemon/cluster/migrations/. The "nonotify" probe is this file
-- with its PERFORM pg_notify('sandglass_outcome', v_payload) replaced by NULL.
--
-- (was 008_one_exchange.sql) sandglass_finish_claim in one function body, with fewer statements.
--
-- 004's sandglass_finish_claim called sandglass_finish and sandglass_claim, which called
-- sandglass_notify_outcomes and sandglass_count_classes: five plpgsql calls (three of them with
-- their own SET plan_cache_mode, saved and restored on each call) and about ten statements per
-- exchange, plus a RETURN NEXT and its assignments per claimed row. The rules are the same, in
-- the same order, in one transaction:
-- - outcomes with fencing (id, attempt, owner, still running), as sandglass_finish (005);
-- - one NOTIFY on sandglass_outcome for the outcomes written (sandglass_notify_outcomes when
--   the payload would be too long for one);
-- - the claim rule of sandglass_claim (004): the head in claim order (class, then deadline)
--   with SKIP LOCKED, locked by one statement and claimed (attempt + 1) or retired
--   (expired_in_queue, too_late_to_start) by a second that names the ids; again while retired
--   rows left room;
-- - the counters decremented once, in ascending class (sandglass_count_classes' statement);
-- - one NOTIFY for the retired rows, then the rows: written, claimed, the retired count.
-- sandglass_finish, sandglass_claim and the others keep their meaning: the heartbeat's claim of
-- 0, the sweep and nodes of 004-007 in a rolling upgrade call them as before.

CREATE OR REPLACE FUNCTION sandglass_finish_claim(p_owner text, p_node text, p_ids bigint[],
                                                  p_attempts integer[], p_states text[],
                                                  p_reasons text[], p_causes text[],
                                                  p_committed boolean[], p_results text[],
                                                  p_errors text[], p_run_us bigint[],
                                                  p_limit integer, p_kinds text[],
                                                  p_tail_us bigint[])
RETURNS TABLE (written bigint, job_id bigint, kind text, args text, priority smallint,
               attempt integer, remaining_us bigint, retired integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  v_now timestamptz; v_want integer; v_seen integer; v_claimed integer := 0;
  v_written bigint[]; v_kinds text[]; v_run bigint[]; v_payload text;
  v_ids bigint[]; v_take boolean[]; v_left bigint[]; v_k text[]; v_a text[]; v_cl smallint[];
  v_at integer[]; v_w bigint[];
  c_ids bigint[] := '{}'; c_kinds text[] := '{}'; c_args text[] := '{}'; c_cl smallint[] := '{}';
  c_at integer[] := '{}'; c_left bigint[] := '{}';
  r_ids bigint[] := '{}'; r_kinds text[] := '{}';
  v_dec bigint[] := ARRAY[0, 0, 0, 0]; v_decw bigint[] := ARRAY[0, 0, 0, 0];
BEGIN
  -- Outcomes, fenced: only the current owner and attempt of a running job writes one.
  IF coalesce(cardinality(p_ids), 0) > 0 THEN
    WITH w AS (
      UPDATE sandglass_jobs j
         SET state = 'done', outcome_state = o.st, reason = o.re, cause = o.ca,
             committed = j.committed OR o.co, result = o.rs, error = o.er, run_us = o.ru,
             finished_at = clock_timestamp()
        FROM unnest(p_ids, p_attempts, p_states, p_reasons, p_causes, p_committed, p_results,
                    p_errors, p_run_us) AS o(id, at, st, re, ca, co, rs, er, ru)
       WHERE j.id = ANY (p_ids) AND j.id = o.id AND j.attempt = o.at
         AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running'
      RETURNING j.id, j.kind, o.ru)
    SELECT array_agg(w.id), array_agg(w.kind), array_agg(w.ru),
           string_agg(w.id::text || ' ' || left(translate(w.kind, E'\n\r', '  '), 200) || ' '
                      || coalesce(w.ru, -1)::text, E'\n')
      INTO v_written, v_kinds, v_run, v_payload FROM w;
    IF v_written IS NOT NULL THEN
      IF octet_length(v_payload) < 7900 THEN
        PERFORM pg_notify('sandglass_outcome', v_payload);
      ELSE
        PERFORM sandglass_notify_outcomes(v_written, v_kinds, v_run);
      END IF;
    END IF;
  END IF;

  -- The claim rule (sandglass_claim, 004).
  IF p_limit > 0 THEN
    v_now := clock_timestamp();
    LOOP
      v_want := p_limit - v_claimed;
      -- The head, locked: claim order, SKIP LOCKED, no more rows than wanted (an index scan of
      -- sandglass_jobs_queue in any plan), with the rule's decision for each row.
      SELECT array_agg(h.id),
             array_agg(h.left_us > 0 AND h.left_us >= coalesce(p_tail_us[array_position(p_kinds, h.kind)], 0)),
             array_agg(h.left_us)
        INTO v_ids, v_take, v_left
        FROM (SELECT q.id, q.kind, floor(extract(epoch FROM (q.deadline - v_now)) * 1000000)::bigint AS left_us
                FROM sandglass_jobs q
               WHERE q.state = 'queued' AND (q.kind = ANY (p_kinds) OR q.deadline <= v_now)
               ORDER BY q.priority, q.deadline
               LIMIT v_want
                 FOR UPDATE SKIP LOCKED) h;
      EXIT WHEN v_ids IS NULL;
      -- Claimed (attempt + 1, the fencing token) or retired, by id (primary-key lookups).
      WITH u AS (
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
        RETURNING j.id, d.take, d.left_us, j.kind, j.args, j.priority, j.attempt, j.work_us)
      SELECT array_agg(u.id), array_agg(u.take), array_agg(u.left_us), array_agg(u.kind),
             array_agg(u.args), array_agg(u.priority), array_agg(u.attempt), array_agg(u.work_us)
        INTO v_ids, v_take, v_left, v_k, v_a, v_cl, v_at, v_w FROM u;
      v_seen := coalesce(cardinality(v_ids), 0);
      EXIT WHEN v_seen = 0;
      FOR i IN 1 .. v_seen LOOP
        v_dec[v_cl[i] + 1] := v_dec[v_cl[i] + 1] + 1;
        v_decw[v_cl[i] + 1] := v_decw[v_cl[i] + 1] + v_w[i];
        IF v_take[i] THEN
          v_claimed := v_claimed + 1;
          c_ids := c_ids || v_ids[i]; c_kinds := c_kinds || v_k[i]; c_args := c_args || v_a[i];
          c_cl := c_cl || v_cl[i]; c_at := c_at || v_at[i]; c_left := c_left || v_left[i];
        ELSE
          r_ids := r_ids || v_ids[i]; r_kinds := r_kinds || v_k[i];
        END IF;
      END LOOP;
      -- Retired rows left room: look again, unless the queue had no more.
      EXIT WHEN v_claimed >= p_limit OR v_seen < v_want;
    END LOOP;
    IF v_dec <> ARRAY[0, 0, 0, 0]::bigint[] THEN  -- sandglass_count_classes, in ascending class
      INSERT INTO sandglass_counters AS sc (node, priority, queued, work_us)
      SELECT p_node, (k - 1)::smallint, -v_dec[k], -v_decw[k]
        FROM generate_series(1, 4) AS k
       WHERE v_dec[k] <> 0 OR v_decw[k] <> 0
       ORDER BY k
      ON CONFLICT (node, priority) DO UPDATE
        SET queued = sc.queued + EXCLUDED.queued, work_us = sc.work_us + EXCLUDED.work_us;
    END IF;
    IF cardinality(r_ids) > 0 THEN
      PERFORM sandglass_notify_outcomes(r_ids, r_kinds, NULL);
    END IF;
  END IF;

  RETURN QUERY
    SELECT u.id, NULL::bigint, NULL::text, NULL::text, NULL::smallint, NULL::integer,
           NULL::bigint, NULL::integer
      FROM unnest(v_written) AS u(id)
    UNION ALL
    SELECT NULL::bigint, u.id, u.k, u.a, u.cl, u.at, u.lf, 0
      FROM unnest(c_ids, c_kinds, c_args, c_cl, c_at, c_left) AS u(id, k, a, cl, at, lf)
    UNION ALL
    SELECT NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::smallint, NULL::integer,
           NULL::bigint, cardinality(r_ids)
     WHERE cardinality(r_ids) > 0;
END $$;
