-- 008_awaited_outcomes.sql: an outcome is announced on sandglass_outcome only when someone
-- waits for it, or when its node shares its run times.
--
-- Why. Every transaction that calls pg_notify takes PostgreSQL's one NOTIFY lock of the whole
-- server at commit (PreCommit_Notify, held to the end of the commit), so the exchanges of all
-- nodes, each of which announced every outcome it wrote, committed one at a time
-- (bench/results/cluster-notify-lock.txt). Most outcomes have no reader: nobody waits for a
-- job submitted without waiting, unless a keyed retry attaches to it.
--
-- The readers of sandglass_outcome (daemon/cluster/listener.cpp) and what they get now:
-- - Waiters. sandglass_jobs.awaited says someone waits for the job's outcome. It is set at
--   insert when the submitter waits (sandglass_submit_claim's p_wait), and by a keyed
--   submission that attaches to the job and waits (the same function). Every function that
--   ends a job announces it when the row it ended is awaited: sandglass_finish, sandglass_claim
--   (the rows it retires), sandglass_end (cancels of queued jobs, node_lost).
--   The race "a waiter attaches while the job ends" loses no answer. The attaching
--   transaction sets awaited with an UPDATE of the row, the outcome write is an UPDATE of the
--   same row, and under READ COMMITTED an UPDATE that finds the row changed by a transaction
--   that committed meanwhile (or waits for one that holds the row) works on the newest
--   version. So one of them is first:
--     the outcome write first: the attach's UPDATE sees the row done; the node then reads the
--       record (intake.cpp, `admitted`: after this statement's commit) and answers at once;
--     the attach first: the outcome write sees awaited = true in the row it updates (its
--       RETURNING is of that newest version) and announces the outcome, which the node's
--       listener hears (and keeps in its recent outcomes, should the NOTIFY come before the
--       waiter is registered: listener.cpp, add_waiter).
--   Nobody ever sets awaited back to false on a committed row (only the inserting transaction
--   does, on its own keyed row), so a row that is awaited in any snapshot stays awaited.
-- - Run-time learning (outcome_noticed -> record_run): each line carries the job's run time.
--   A node passes p_share = true to sandglass_finish_claim at most once per kShareRunTimes
--   (daemon/cluster/run_time_sharing.hpp), so an isolated outcome is always announced and
--   under a high rate a sample is: every outcome of one exchange per interval, plus the
--   awaited ones. A node learns its own run times from its own outcomes, announced or not
--   (outcome_writer.cpp).
-- - The notify-lag metric observes the announced outcomes only.
--
-- The column defaults to true: a row inserted by any other path (an older node's functions,
-- sandglass_admit's keyed insert before it is corrected here) is announced as before. The
-- older signatures keep their meaning for nodes of 004-007 still running in a rolling upgrade:
-- their submissions wait (p_wait all true, which also marks every job they attach to), their
-- exchanges share every outcome. sandglass_submit_many (003 nodes) marks the jobs it attaches
-- to as well. A node older than 008 cannot start on this database (its schema is too new).

ALTER TABLE sandglass_jobs ADD COLUMN awaited boolean NOT NULL DEFAULT true;

-- Ends a job with an outcome decided in the database, announced when the job is awaited.
CREATE OR REPLACE FUNCTION sandglass_end(p_id bigint, p_kind text, p_state text, p_reason text,
                                         p_cause text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_awaited boolean;
BEGIN
  UPDATE sandglass_jobs SET state = 'done', outcome_state = p_state, reason = p_reason,
         cause = p_cause, finished_at = clock_timestamp()
   WHERE id = p_id
  RETURNING awaited INTO v_awaited;
  IF v_awaited THEN
    PERFORM pg_notify('sandglass_outcome', p_id::text || ' ' || p_kind || ' -1');
  END IF;
END $$;

-- Marks the jobs of p_ids (ascending, so that two callers lock them in the same order) as
-- awaited, unless they are already. Called by a submission that attaches to them and waits.
CREATE FUNCTION sandglass_await(p_ids bigint[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF coalesce(cardinality(p_ids), 0) = 0 THEN RETURN; END IF;
  UPDATE sandglass_jobs j SET awaited = true WHERE j.id = ANY (p_ids) AND NOT j.awaited;
END $$;

-- 004's claim rule, unchanged; the rows it retires are announced only when awaited.
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

-- Outcomes with fencing (003's rule: written only while the job is still running under this
-- owner and attempt). Announced: every outcome written when p_share, else the awaited ones.
-- Returns the ids written, each with whether it was announced; the others were stale.
CREATE FUNCTION sandglass_finish(p_owner text, p_ids bigint[], p_attempts integer[],
                                 p_states text[], p_reasons text[], p_causes text[],
                                 p_committed boolean[], p_results text[], p_errors text[],
                                 p_run_us bigint[], p_share boolean)
RETURNS TABLE (id bigint, notified boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE v_ids bigint[]; v_told boolean[]; v_told_ids bigint[]; v_kinds text[]; v_run bigint[];
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
    RETURNING j.id AS jid, j.kind AS jkind, o.ru AS ru, p_share OR j.awaited AS told)
  SELECT array_agg(w.jid), array_agg(w.told), array_agg(w.jid) FILTER (WHERE w.told),
         array_agg(w.jkind) FILTER (WHERE w.told), array_agg(w.ru) FILTER (WHERE w.told)
    INTO v_ids, v_told, v_told_ids, v_kinds, v_run FROM written w;
  IF v_ids IS NULL THEN RETURN; END IF;
  IF v_told_ids IS NOT NULL THEN PERFORM sandglass_notify_outcomes(v_told_ids, v_kinds, v_run); END IF;
  RETURN QUERY SELECT t.i, t.n FROM unnest(v_ids, v_told) AS t(i, n);
END $$;

-- 003's signature and meaning (every outcome written is announced), for older nodes.
CREATE OR REPLACE FUNCTION sandglass_finish(p_owner text, p_ids bigint[], p_attempts integer[],
                                            p_states text[], p_reasons text[], p_causes text[],
                                            p_committed boolean[], p_results text[],
                                            p_errors text[], p_run_us bigint[])
RETURNS SETOF bigint LANGUAGE sql AS $$
  SELECT f.id FROM sandglass_finish(p_owner, p_ids, p_attempts, p_states, p_reasons, p_causes,
                                    p_committed, p_results, p_errors, p_run_us, true) AS f;
$$;

-- 004's exchange (outcomes, then a claim of up to p_limit jobs), with p_share passed to
-- sandglass_finish. Rows with `written` set are the outcomes written (`notified`: announced);
-- the others are sandglass_claim's rows.
CREATE FUNCTION sandglass_finish_claim(p_owner text, p_node text, p_ids bigint[],
                                       p_attempts integer[], p_states text[], p_reasons text[],
                                       p_causes text[], p_committed boolean[], p_results text[],
                                       p_errors text[], p_run_us bigint[], p_limit integer,
                                       p_kinds text[], p_tail_us bigint[], p_share boolean)
RETURNS TABLE (written bigint, notified boolean, job_id bigint, kind text, args text,
               priority smallint, attempt integer, remaining_us bigint, retired integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF coalesce(cardinality(p_ids), 0) > 0 THEN
    RETURN QUERY
      SELECT f.id, f.notified, NULL::bigint, NULL::text, NULL::text, NULL::smallint,
             NULL::integer, NULL::bigint, NULL::integer
        FROM sandglass_finish(p_owner, p_ids, p_attempts, p_states, p_reasons, p_causes,
                              p_committed, p_results, p_errors, p_run_us, p_share) AS f;
  END IF;
  IF p_limit > 0 THEN
    RETURN QUERY
      SELECT NULL::bigint, NULL::boolean, c.job_id, c.kind, c.args, c.priority, c.attempt,
             c.remaining_us, c.retired
        FROM sandglass_claim(p_owner, p_node, p_limit, p_kinds, p_tail_us) AS c;
  END IF;
END $$;

-- 004's signature and meaning (every outcome written is announced), for older nodes.
CREATE OR REPLACE FUNCTION sandglass_finish_claim(p_owner text, p_node text, p_ids bigint[],
                                                  p_attempts integer[], p_states text[],
                                                  p_reasons text[], p_causes text[],
                                                  p_committed boolean[], p_results text[],
                                                  p_errors text[], p_run_us bigint[],
                                                  p_limit integer, p_kinds text[],
                                                  p_tail_us bigint[])
RETURNS TABLE (written bigint, job_id bigint, kind text, args text, priority smallint,
               attempt integer, remaining_us bigint, retired integer)
LANGUAGE sql AS $$
  SELECT f.written, f.job_id, f.kind, f.args, f.priority, f.attempt, f.remaining_us, f.retired
    FROM sandglass_finish_claim(p_owner, p_node, p_ids, p_attempts, p_states, p_reasons,
                                p_causes, p_committed, p_results, p_errors, p_run_us, p_limit,
                                p_kinds, p_tail_us, true) AS f;
$$;

-- 005's sandglass_submit_claim (admission by sandglass_admit, claims at insert), and who
-- waits: p_wait[i] says the submitter of job i waits for its outcome. A job inserted here is
-- awaited when its submitter waits; a job attached to by a waiting submitter becomes awaited
-- (sandglass_await; see this file's header for the race with its outcome).
CREATE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
                                       p_served text[], p_kinds text[], p_args text[],
                                       p_priorities smallint[], p_keys text[],
                                       p_fingerprints text[], p_remaining_us bigint[],
                                       p_budget_us bigint[], p_work_us bigint[],
                                       p_tail_us bigint[], p_lease_ms bigint, p_wait boolean[])
RETURNS TABLE (ord integer, job_id bigint, verdict text, remaining_us bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  a record; c record; i integer; v_class integer; v_now timestamptz;
  v_head_pr smallint; v_head_dl timestamptz; v_taken integer := 0;
  v_add bigint[] := ARRAY[0, 0, 0, 0]; v_addw bigint[] := ARRAY[0, 0, 0, 0];
  v_new integer[] := '{}'; v_new_ids bigint[] := '{}'; v_claim boolean[]; v_kinds text[] := '{}';
  v_ord integer[] := '{}'; v_res_ids bigint[] := '{}'; v_verdicts text[] := '{}';
  v_attach bigint[] := '{}'; v_unawaited bigint[] := '{}';
BEGIN
  FOR a IN
    SELECT * FROM sandglass_admit(p_kinds, p_args, p_priorities, p_keys, p_fingerprints,
                                  p_remaining_us, p_budget_us, p_work_us, p_tail_us, p_lease_ms)
  LOOP
    v_ord := v_ord || a.ord; v_res_ids := v_res_ids || a.job_id; v_verdicts := v_verdicts || a.verdict;
    IF a.verdict = 'admitted' AND a.inserted THEN  -- keyed: queued already, counted here
      v_class := p_priorities[a.ord] + 1;
      v_add[v_class] := v_add[v_class] + 1;
      v_addw[v_class] := v_addw[v_class] + p_work_us[a.ord];
      IF NOT (p_kinds[a.ord] = ANY (v_kinds)) THEN v_kinds := v_kinds || p_kinds[a.ord]; END IF;
      IF NOT p_wait[a.ord] THEN v_unawaited := v_unawaited || a.job_id; END IF;
    ELSIF a.verdict = 'admitted' THEN
      v_new := v_new || a.ord;
      v_new_ids := v_new_ids || a.job_id;
    ELSIF a.verdict = 'attached' AND p_wait[a.ord] THEN
      v_attach := v_attach || a.job_id;
    END IF;
  END LOOP;
  -- Keyed rows inserted by sandglass_admit took the column's default (awaited); those of
  -- submitters that do not wait are not, unless a waiting submission of this batch attached
  -- to them. Only this transaction knows these rows yet.
  IF cardinality(v_unawaited) > 0 THEN
    UPDATE sandglass_jobs j SET awaited = false
     WHERE j.id = ANY (v_unawaited) AND NOT (j.id = ANY (v_attach));
  END IF;
  PERFORM sandglass_await(ARRAY(SELECT DISTINCT x FROM unnest(v_attach) AS x ORDER BY x));

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
                              state, owner, attempt, claimed_at, node_ran, awaited)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         v_now, v_now + p_remaining_us[u.o] * interval '1 microsecond',
         CASE WHEN u.cl THEN 'running' ELSE 'queued' END,
         CASE WHEN u.cl THEN p_owner END,
         CASE WHEN u.cl THEN 1 ELSE 0 END,
         CASE WHEN u.cl THEN v_now END,
         CASE WHEN u.cl THEN p_node END,
         p_wait[u.o]
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

-- 005's signature for older nodes, which do not say who waits: as if every submitter waited
-- (every job they insert or attach to is awaited, as before 008 every job was announced).
CREATE OR REPLACE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
                                                  p_served text[], p_kinds text[], p_args text[],
                                                  p_priorities smallint[], p_keys text[],
                                                  p_fingerprints text[], p_remaining_us bigint[],
                                                  p_budget_us bigint[], p_work_us bigint[],
                                                  p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text, remaining_us bigint)
LANGUAGE sql AS $$
  SELECT s.ord, s.job_id, s.verdict, s.remaining_us
    FROM sandglass_submit_claim(p_node, p_owner, p_claim, p_served, p_kinds, p_args,
                                p_priorities, p_keys, p_fingerprints, p_remaining_us,
                                p_budget_us, p_work_us, p_tail_us, p_lease_ms,
                                array_fill(true, ARRAY[coalesce(cardinality(p_kinds), 0)])) AS s;
$$;

-- 005's sandglass_submit_many (003 nodes), unchanged but for one thing: the jobs it attaches to
-- become awaited (it cannot tell whether its submitters wait; the rows it inserts are awaited
-- by the column's default).
CREATE OR REPLACE FUNCTION sandglass_submit_many(p_node text, p_kinds text[], p_args text[],
                                                 p_priorities smallint[], p_keys text[],
                                                 p_fingerprints text[], p_remaining_us bigint[],
                                                 p_budget_us bigint[], p_work_us bigint[],
                                                 p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  a record; v_class integer;
  v_add bigint[] := ARRAY[0, 0, 0, 0]; v_addw bigint[] := ARRAY[0, 0, 0, 0];
  v_new integer[] := '{}'; v_new_ids bigint[] := '{}'; v_kinds text[] := '{}';
  v_attach bigint[] := '{}';
BEGIN
  FOR a IN
    SELECT * FROM sandglass_admit(p_kinds, p_args, p_priorities, p_keys, p_fingerprints,
                                  p_remaining_us, p_budget_us, p_work_us, p_tail_us, p_lease_ms)
  LOOP
    IF a.verdict = 'admitted' THEN
      v_class := p_priorities[a.ord] + 1;
      v_add[v_class] := v_add[v_class] + 1;
      v_addw[v_class] := v_addw[v_class] + p_work_us[a.ord];
      IF NOT (p_kinds[a.ord] = ANY (v_kinds)) THEN v_kinds := v_kinds || p_kinds[a.ord]; END IF;
      IF NOT a.inserted THEN
        v_new := v_new || a.ord;
        v_new_ids := v_new_ids || a.job_id;
      END IF;
    ELSIF a.verdict = 'attached' THEN
      v_attach := v_attach || a.job_id;
    END IF;
    ord := a.ord; job_id := a.job_id; verdict := a.verdict;
    RETURN NEXT;
  END LOOP;
  PERFORM sandglass_await(ARRAY(SELECT DISTINCT x FROM unnest(v_attach) AS x ORDER BY x));
  INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         clock_timestamp() + p_remaining_us[u.o] * interval '1 microsecond'
    FROM unnest(v_new, v_new_ids) AS u(o, id);
  PERFORM sandglass_count_classes(p_node, v_add, v_addw);
  PERFORM pg_notify('sandglass_queued', kn.name) FROM unnest(v_kinds) AS kn(name);
END $$;
