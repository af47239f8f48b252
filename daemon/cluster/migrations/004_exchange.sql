-- 004_exchange.sql: the same rules as 001-003, in fewer and cheaper statements per job.
--
-- - sandglass_finish_claim: a node's ready outcomes and its next claim in one statement (one
--   round trip, one commit): a finished job frees a worker, and the claim that fills it carries
--   the outcome. The fencing (sandglass_finish) and the claim rule (sandglass_claim) are the
--   functions below, called in that order in one transaction.
-- - sandglass_submit_claim: sandglass_submit_many's admission, and a node with free workers
--   inserts a job it serves already claimed by itself (attempt 1) when the job comes before
--   every queued job of the kinds it serves (class first, then deadline: the claim rule, which
--   a claim right after the insert would have applied to it). Such a job is never queued, so
--   it never enters the counters and sends no NOTIFY on sandglass_queued.
-- - sandglass_claim: the same rule as 003, planned once per session. 003's one statement was
--   planned again on every call (0.23 ms of its 0.66 ms, measured with pg_stat_statements),
--   because its generic plan, with LIMIT a parameter, joined the head to a sequential scan of
--   the table. Here the head is locked by one statement, an index scan in any plan, and
--   claimed or retired by a second that names the ids (= ANY, the primary key).
--
-- Nodes of 003 and 004 can share a database: 003's functions are still there with their
-- meaning, and a job claimed at insert is an ordinary running row to a 003 node's sweep.

CREATE OR REPLACE FUNCTION sandglass_claim(p_owner text, p_node text, p_limit integer,
                                           p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (job_id bigint, kind text, args text, priority smallint, attempt integer,
               remaining_us bigint, retired integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r record; v_now timestamptz := clock_timestamp(); v_claimed integer := 0;
  v_retired integer := 0; v_seen integer; v_want integer;
  v_ids bigint[]; v_take boolean[]; v_left bigint[];
  v_dec bigint[] := ARRAY[0, 0, 0, 0]; v_decw bigint[] := ARRAY[0, 0, 0, 0];
  v_ended bigint[] := '{}'; v_ended_kinds text[] := '{}';
BEGIN
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
                d.left_us AS left_us, j.work_us AS w, d.take AS take
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
        v_ended := v_ended || r.id;
        v_ended_kinds := v_ended_kinds || r.k;
      END IF;
    END LOOP;
    -- Retired rows left room: look again, unless the queue had no more.
    EXIT WHEN p_limit = 0 OR v_claimed >= p_limit OR v_seen < v_want;
  END LOOP;
  IF v_dec <> ARRAY[0, 0, 0, 0]::bigint[] THEN
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

-- Outcomes (sandglass_finish: fenced by id, attempt and owner) and then a claim of up to
-- p_limit jobs (sandglass_claim; none when p_limit is 0 — unlike sandglass_claim, 0 does not
-- retire expired heads here). Rows with `written` set are the outcomes written; the others are
-- sandglass_claim's rows.
CREATE FUNCTION sandglass_finish_claim(p_owner text, p_node text, p_ids bigint[],
                                       p_attempts integer[], p_states text[], p_reasons text[],
                                       p_causes text[], p_committed boolean[], p_results text[],
                                       p_errors text[], p_run_us bigint[], p_limit integer,
                                       p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (written bigint, job_id bigint, kind text, args text, priority smallint,
               attempt integer, remaining_us bigint, retired integer)
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(p_ids), 0) > 0 THEN
    RETURN QUERY
      SELECT f.id, NULL::bigint, NULL::text, NULL::text, NULL::smallint, NULL::integer,
             NULL::bigint, NULL::integer
        FROM sandglass_finish(p_owner, p_ids, p_attempts, p_states, p_reasons, p_causes,
                              p_committed, p_results, p_errors, p_run_us) AS f(id);
  END IF;
  IF p_limit > 0 THEN
    RETURN QUERY
      SELECT NULL::bigint, c.job_id, c.kind, c.args, c.priority, c.attempt, c.remaining_us,
             c.retired
        FROM sandglass_claim(p_owner, p_node, p_limit, p_kinds, p_tail_us) AS c;
  END IF;
END $$;

-- sandglass_submit_many (003) with claims at insert: up to p_claim of the admitted unkeyed jobs
-- of the kinds in p_served that come before every queued job of those kinds (class, then
-- deadline; queued rows past their deadline do not count: a claim retires them) are inserted
-- running, owner p_owner, attempt 1, in claim order. verdict 'claimed' names them, with the
-- time they have left by this clock; every other verdict is sandglass_submit_many's.
CREATE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
                                       p_served text[], p_kinds text[], p_args text[],
                                       p_priorities smallint[], p_keys text[],
                                       p_fingerprints text[], p_remaining_us bigint[],
                                       p_budget_us bigint[], p_work_us bigint[],
                                       p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text, remaining_us bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer; v_class integer; v_id bigint; v_fp text; v_queued bigint; v_workers bigint;
  v_capacity bigint; v_ahead bigint; v_now timestamptz;
  v_head_pr smallint; v_head_dl timestamptz; v_taken integer := 0;
  v_work bigint[] := ARRAY[0, 0, 0, 0];   -- queued work per class (index class + 1)
  v_add bigint[] := ARRAY[0, 0, 0, 0]; v_addw bigint[] := ARRAY[0, 0, 0, 0];
  v_new integer[] := '{}'; v_new_ids bigint[] := '{}'; v_claim boolean[]; v_kinds text[] := '{}';
  v_ord integer[] := '{}'; v_res_ids bigint[] := '{}'; v_verdicts text[] := '{}';
  c record;
BEGIN
  SELECT coalesce(sum(sc.queued), 0) INTO v_queued FROM sandglass_counters sc;
  FOR c IN SELECT sc.priority AS cl, sum(sc.work_us) AS w FROM sandglass_counters sc GROUP BY sc.priority LOOP
    IF c.cl BETWEEN 0 AND 3 THEN v_work[c.cl + 1] := c.w; END IF;
  END LOOP;
  SELECT coalesce(sum(n.workers), 0), coalesce(sum(n.capacity), 0) INTO v_workers, v_capacity
    FROM sandglass_nodes n
   WHERE n.heartbeat_at > clock_timestamp() - p_lease_ms * interval '1 millisecond';
  -- Admission, job by job in class order, exactly as sandglass_submit_many.
  FOR i IN
    SELECT o.n FROM unnest(p_priorities) WITH ORDINALITY AS o(pr, n) ORDER BY o.pr, o.n
  LOOP
    v_class := p_priorities[i] + 1;
    v_ord := v_ord || i;
    IF p_keys[i] IS NOT NULL THEN
      SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_keys[i];
      IF FOUND THEN
        v_res_ids := v_res_ids || v_id;
        v_verdicts := v_verdicts || CASE WHEN v_fp = p_fingerprints[i] THEN 'attached' ELSE 'conflict' END;
        CONTINUE;
      END IF;
    END IF;
    IF v_capacity > 0 AND v_queued >= v_capacity THEN
      v_res_ids := v_res_ids || NULL::bigint; v_verdicts := v_verdicts || 'queue_full'::text; CONTINUE;
    END IF;
    v_ahead := 0;
    FOR k IN 1 .. v_class LOOP v_ahead := v_ahead + v_work[k]; END LOOP;
    IF p_tail_us[i] > 0 AND v_workers > 0 AND v_ahead / v_workers + p_tail_us[i] > p_remaining_us[i] THEN
      v_res_ids := v_res_ids || NULL::bigint; v_verdicts := v_verdicts || 'deadline_implausible'::text; CONTINUE;
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
        v_res_ids := v_res_ids || v_id;
        v_verdicts := v_verdicts || CASE WHEN v_fp = p_fingerprints[i] THEN 'attached' ELSE 'conflict' END;
        CONTINUE;
      END IF;
      IF NOT (p_kinds[i] = ANY (v_kinds)) THEN v_kinds := v_kinds || p_kinds[i]; END IF;
      v_add[v_class] := v_add[v_class] + 1;
      v_addw[v_class] := v_addw[v_class] + p_work_us[i];
    ELSE
      v_id := nextval('sandglass_jobs_id_seq');
      v_new := v_new || i;
      v_new_ids := v_new_ids || v_id;
    END IF;
    v_queued := v_queued + 1;
    v_work[v_class] := v_work[v_class] + p_work_us[i];
    v_res_ids := v_res_ids || v_id; v_verdicts := v_verdicts || 'admitted'::text;
  END LOOP;

  -- Claims at insert: the unkeyed admitted jobs this node serves, in claim order, while they
  -- come before the queue's head (of the served kinds, not yet expired) and p_claim allows.
  v_now := clock_timestamp();
  v_claim := array_fill(false, ARRAY[cardinality(v_new)]);
  IF p_claim > 0 AND cardinality(v_new) > 0 THEN
    SELECT j.priority, j.deadline INTO v_head_pr, v_head_dl FROM sandglass_jobs j
     WHERE j.state = 'queued' AND j.kind = ANY (p_served) AND j.deadline > v_now
     ORDER BY j.priority, j.deadline LIMIT 1;
    FOR c IN
      SELECT u.n AS n FROM unnest(v_new) WITH ORDINALITY AS u(o, n)
       WHERE p_kinds[u.o] = ANY (p_served)
       ORDER BY p_priorities[u.o], p_remaining_us[u.o]
    LOOP
      EXIT WHEN v_taken >= p_claim;
      i := v_new[c.n];
      EXIT WHEN v_head_pr IS NOT NULL AND
                (p_priorities[i], v_now + p_remaining_us[i] * interval '1 microsecond') >= (v_head_pr, v_head_dl);
      v_claim[c.n] := true;
      v_taken := v_taken + 1;
    END LOOP;
  END IF;
  FOR k IN 1 .. coalesce(cardinality(v_new), 0) LOOP
    i := v_new[k];
    IF NOT v_claim[k] THEN
      v_add[p_priorities[i] + 1] := v_add[p_priorities[i] + 1] + 1;
      v_addw[p_priorities[i] + 1] := v_addw[p_priorities[i] + 1] + p_work_us[i];
      IF NOT (p_kinds[i] = ANY (v_kinds)) THEN v_kinds := v_kinds || p_kinds[i]; END IF;
    END IF;
  END LOOP;
  -- Created, and for a claimed job claimed, at the instant its deadline counts from.
  INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, created_at, deadline,
                              state, owner, attempt, claimed_at, node_ran)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         v_now, v_now + p_remaining_us[u.o] * interval '1 microsecond',
         CASE WHEN u.cl THEN 'running' ELSE 'queued' END,
         CASE WHEN u.cl THEN p_owner END,
         CASE WHEN u.cl THEN 1 ELSE 0 END,
         CASE WHEN u.cl THEN v_now END,
         CASE WHEN u.cl THEN p_node END
    FROM unnest(v_new, v_new_ids, v_claim) AS u(o, id, cl);
  PERFORM sandglass_count_classes(p_node, v_add, v_addw);
  PERFORM pg_notify('sandglass_queued', kn.name) FROM unnest(v_kinds) AS kn(name);
  RETURN QUERY
    SELECT r.o, r.id,
           CASE WHEN r.v = 'admitted' AND coalesce(v_claim[array_position(v_new, r.o)], false)
                THEN 'claimed' ELSE r.v END,
           CASE WHEN r.v = 'admitted' AND coalesce(v_claim[array_position(v_new, r.o)], false)
                THEN floor(extract(epoch FROM (v_now - clock_timestamp())) * 1000000)::bigint
                     + p_remaining_us[r.o] END
      FROM unnest(v_ord, v_res_ids, v_verdicts) AS r(o, id, v);
END $$;

-- One plan per session for the statements a node runs per job (measured in one session, queue
-- of 40,000 rows: a claim of 5 from 0.60 to 0.24 ms, a batch of 5 outcomes from 1.54 to 0.67
-- ms). Each generic plan was read with EXPLAIN: the head is an index scan of
-- sandglass_jobs_queue in claim order, rows named by id are primary-key lookups, the counters
-- are a few rows. A function's SET holds for the functions it calls too.
ALTER FUNCTION sandglass_claim(text, text, integer, text[], bigint[])
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION sandglass_finish(text, bigint[], integer[], text[], text[], text[], boolean[],
                                text[], text[], bigint[])
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION sandglass_finish_claim(text, text, bigint[], integer[], text[], text[], text[],
                                      boolean[], text[], text[], bigint[], integer, text[], bigint[])
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION sandglass_submit_claim(text, text, integer, text[], text[], text[], smallint[],
                                      text[], text[], bigint[], bigint[], bigint[], bigint[], bigint)
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION sandglass_heartbeat(text, bigint[], integer[])
  SET plan_cache_mode = force_generic_plan;
