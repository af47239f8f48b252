-- 013_intake.sql: exactly-once intake, admission that reserves atomically and counts the
-- workers that can run a kind, and claims at insert only by a node that holds its lease.
--
-- Intake tokens. A node gives every submission a random token (sandglass_jobs.intake_token),
-- written with the row it inserts. When the connection breaks while a submission's statement
-- ran, its COMMIT may or may not have happened: the node ends the old session's server process
-- (so it cannot commit later), then looks the tokens up on a new session (intake.cpp): a row
-- found is the job, answered as admitted; a token not found was never inserted, so trying the
-- submission once more cannot insert it twice.
--
-- Atomic admission. Each submission statement reads the counters and decides queue_full and
-- deadline_implausible for its batch, then writes its counter changes. Two statements that read
-- the same counters could each admit the last places of the queue (overshoot). The admission
-- now holds a transaction-level advisory lock (key 7170734562315111684, used for nothing else)
-- from before it reads the counters to its commit, so each statement's decision counts every
-- committed admission before it. No deadlock: a submission takes it first, before any job row,
-- the hunger lock (009) or a counter row; nothing else takes it; every transaction a holder may
-- wait for (a keyed insert's conflicting row, a job row it marks awaited, a claim holding the
-- hunger lock) never waits for it.
--
-- Workers that serve the kind. sandglass_nodes.kinds lists the kinds a node claims (NULL: not
-- told; counted as serving every kind). The running term and the division of queued work use
-- only the live nodes that serve the job's kind; queue_full stays the whole cluster's capacity.
--
-- Claims at insert only by a node that holds its lease (012's sandglass_holds_lease): one
-- that may have lost it (its jobs may be swept as it inserts) inserts its submissions queued.

ALTER TABLE sandglass_jobs ADD COLUMN intake_token uuid;
CREATE INDEX sandglass_jobs_intake_token ON sandglass_jobs (intake_token)
  WHERE intake_token IS NOT NULL;
ALTER TABLE sandglass_nodes ADD COLUMN kinds text[];

-- 006's sandglass_admit, with intake tokens, the admission lock and per-kind workers.
CREATE FUNCTION sandglass_admit(p_kinds text[], p_args text[], p_priorities smallint[],
                                p_keys text[], p_fingerprints text[], p_remaining_us bigint[],
                                p_budget_us bigint[], p_work_us bigint[], p_tail_us bigint[],
                                p_lease_ms bigint, p_tokens uuid[])
RETURNS TABLE (ord integer, job_id bigint, verdict text, inserted boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer; v_class integer; v_id bigint; v_fp text; v_queued bigint; v_capacity bigint;
  v_ahead bigint; v_at integer; v_now timestamptz;
  v_work bigint[] := ARRAY[0, 0, 0, 0];   -- queued work per class (index class + 1)
  v_names text[];                         -- the batch's kinds, and per kind (same index):
  v_workers bigint[];                     --   the workers of the live nodes that serve it
  v_running bigint[];                     --   their running jobs' expected rest (0: one is idle)
  c record;
BEGIN
  PERFORM pg_advisory_xact_lock(7170734562315111684);
  v_now := clock_timestamp();
  SELECT coalesce(sum(sc.queued), 0) INTO v_queued FROM sandglass_counters sc;
  FOR c IN SELECT sc.priority AS cl, sum(sc.work_us) AS w FROM sandglass_counters sc GROUP BY sc.priority LOOP
    IF c.cl BETWEEN 0 AND 3 THEN v_work[c.cl + 1] := c.w; END IF;
  END LOOP;
  SELECT coalesce(sum(n.capacity), 0) INTO v_capacity FROM sandglass_nodes n
   WHERE n.heartbeat_at > v_now - p_lease_ms * interval '1 millisecond';
  -- Per kind, as a lone daemon's admission: running work delays a newcomer only while none of
  -- the workers that could run it is idle.
  SELECT array_agg(k.name ORDER BY k.name), array_agg(k.workers ORDER BY k.name),
         array_agg(CASE WHEN k.busy < k.workers THEN 0 ELSE k.running END ORDER BY k.name)
    INTO v_names, v_workers, v_running
    FROM (SELECT u.name, coalesce(sum(n.workers), 0)::bigint AS workers,
                 coalesce(sum(least(n.busy, n.workers)), 0)::bigint AS busy,
                 coalesce(sum(greatest(0, n.running_rest_us - floor(extract(epoch FROM
                          (v_now - n.running_at)) * 1000000)::bigint)), 0)::bigint AS running
            FROM (SELECT DISTINCT x AS name FROM unnest(p_kinds) AS x) u
            LEFT JOIN sandglass_nodes n
              ON n.heartbeat_at > v_now - p_lease_ms * interval '1 millisecond'
             AND (n.kinds IS NULL OR u.name = ANY (n.kinds))
           GROUP BY u.name) k;
  FOR i IN
    SELECT o.n FROM unnest(p_priorities) WITH ORDINALITY AS o(pr, n) ORDER BY o.pr, o.n
  LOOP
    v_class := p_priorities[i] + 1;
    ord := i; inserted := false;
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
    v_at := array_position(v_names, p_kinds[i]);
    IF p_tail_us[i] > 0 AND v_workers[v_at] > 0
       AND (v_ahead + v_running[v_at]) / v_workers[v_at] + p_tail_us[i] > p_remaining_us[i] THEN
      job_id := NULL; verdict := 'deadline_implausible'; RETURN NEXT; CONTINUE;
    END IF;
    IF p_keys[i] IS NOT NULL THEN
      v_id := NULL;
      INSERT INTO sandglass_jobs (kind, args, priority, idempotency_key, fingerprint, budget_us,
                                  work_us, deadline, intake_token)
      VALUES (p_kinds[i], p_args[i], p_priorities[i], p_keys[i], p_fingerprints[i], p_budget_us[i],
              p_work_us[i], clock_timestamp() + p_remaining_us[i] * interval '1 microsecond',
              p_tokens[i])
      ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING id INTO v_id;
      IF v_id IS NULL THEN  -- another node inserted this key since the check above
        SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_keys[i];
        job_id := v_id;
        verdict := CASE WHEN v_fp = p_fingerprints[i] THEN 'attached' ELSE 'conflict' END;
        RETURN NEXT;
        CONTINUE;
      END IF;
      inserted := true;
    ELSE
      v_id := nextval('sandglass_jobs_id_seq');
    END IF;
    v_queued := v_queued + 1;
    v_work[v_class] := v_work[v_class] + p_work_us[i];
    job_id := v_id; verdict := 'admitted';
    RETURN NEXT;
  END LOOP;
END $$;

-- 009's sandglass_submit_claim with intake tokens (sandglass_admit above; the unkeyed rows here),
-- and claims at insert only while the inserting node's own row is fresh.
CREATE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
                                       p_served text[], p_kinds text[], p_args text[],
                                       p_priorities smallint[], p_keys text[],
                                       p_fingerprints text[], p_remaining_us bigint[],
                                       p_budget_us bigint[], p_work_us bigint[],
                                       p_tail_us bigint[], p_lease_ms bigint, p_wait boolean[],
                                       p_tokens uuid[])
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
                                  p_remaining_us, p_budget_us, p_work_us, p_tail_us, p_lease_ms,
                                  p_tokens)
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
  -- Before any counter row is locked (this file's header: no deadlock with a claim that holds
  -- the lock exclusively and then counts its claims). Only a statement that may queue a job.
  IF cardinality(v_new) > 0 OR cardinality(v_kinds) > 0 THEN
    PERFORM pg_advisory_xact_lock_shared(7170734562315111683);
  END IF;

  -- Claims at insert: the unkeyed admitted jobs this node serves, in claim order, while they
  -- come before the queue's head (of the served kinds, not yet expired) and p_claim allows.
  v_now := clock_timestamp();
  v_claim := array_fill(false, ARRAY[cardinality(v_new)]);
  -- Only while this node's own row is fresh: a node past its lease may be swept meanwhile.
  IF p_claim > 0 AND cardinality(v_new) > 0 AND sandglass_holds_lease(p_owner, v_now) THEN
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
                              state, owner, attempt, claimed_at, node_ran, awaited, intake_token)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         v_now, v_now + p_remaining_us[u.o] * interval '1 microsecond',
         CASE WHEN u.cl THEN 'running' ELSE 'queued' END,
         CASE WHEN u.cl THEN p_owner END,
         CASE WHEN u.cl THEN 1 ELSE 0 END,
         CASE WHEN u.cl THEN v_now END,
         CASE WHEN u.cl THEN p_node END,
         p_wait[u.o], p_tokens[u.o]
    FROM unnest(v_new, v_new_ids, v_claim) AS u(o, id, cl);
  PERFORM sandglass_count_classes(p_node, v_add, v_addw);
  PERFORM sandglass_wake_hungry(v_kinds, p_lease_ms);
  RETURN QUERY
    SELECT r.o, r.id,
           CASE WHEN r.v = 'admitted' AND coalesce(v_claim[array_position(v_new, r.o)], false)
                THEN 'claimed' ELSE r.v END,
           CASE WHEN r.v = 'admitted' AND coalesce(v_claim[array_position(v_new, r.o)], false)
                THEN floor(extract(epoch FROM (v_now - clock_timestamp())) * 1000000)::bigint
                     + p_remaining_us[r.o] END
      FROM unnest(v_ord, v_res_ids, v_verdicts) AS r(o, id, v);
END $$;
