-- 005_take_back.sql: a node takes back the claims whose answer it lost; and the admission
-- loop of 003 and 004 in one function (sandglass_admit, at the end).
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

-- ---------------------------------------------------------------------------------------------
-- One admission rule in one place. 004's sandglass_submit_claim restated 003's admission loop
-- of sandglass_submit_many; both now call sandglass_admit, which is that loop, and keep their
-- signatures and meaning (003 and 004 nodes call them as before).

-- Cluster-wide admission of a batch (order and reasons: 002_submit_many.sql): the counters and
-- the live nodes are read once, each job is admitted in class order against what the batch
-- admitted before it. A keyed job is attached, a conflict, or inserted here (queued; inserted
-- true); an admitted job without a key gets its id reserved (inserted false) for the caller to
-- insert. Rows come in the order decided; counting and NOTIFY are the caller's.
CREATE FUNCTION sandglass_admit(p_kinds text[], p_args text[], p_priorities smallint[],
                                p_keys text[], p_fingerprints text[], p_remaining_us bigint[],
                                p_budget_us bigint[], p_work_us bigint[], p_tail_us bigint[],
                                p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text, inserted boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer; v_class integer; v_id bigint; v_fp text; v_queued bigint; v_workers bigint;
  v_capacity bigint; v_ahead bigint;
  v_work bigint[] := ARRAY[0, 0, 0, 0];   -- queued work per class (index class + 1)
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
    END IF;
    ord := a.ord; job_id := a.job_id; verdict := a.verdict;
    RETURN NEXT;
  END LOOP;
  INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         clock_timestamp() + p_remaining_us[u.o] * interval '1 microsecond'
    FROM unnest(v_new, v_new_ids) AS u(o, id);
  PERFORM sandglass_count_classes(p_node, v_add, v_addw);
  PERFORM pg_notify('sandglass_queued', kn.name) FROM unnest(v_kinds) AS kn(name);
END $$;

-- 004's sandglass_submit_claim on sandglass_admit; its claims at insert are unchanged.
CREATE OR REPLACE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
                                                  p_served text[], p_kinds text[], p_args text[],
                                                  p_priorities smallint[], p_keys text[],
                                                  p_fingerprints text[], p_remaining_us bigint[],
                                                  p_budget_us bigint[], p_work_us bigint[],
                                                  p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text, remaining_us bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  a record; c record; i integer; v_class integer; v_now timestamptz;
  v_head_pr smallint; v_head_dl timestamptz; v_taken integer := 0;
  v_add bigint[] := ARRAY[0, 0, 0, 0]; v_addw bigint[] := ARRAY[0, 0, 0, 0];
  v_new integer[] := '{}'; v_new_ids bigint[] := '{}'; v_claim boolean[]; v_kinds text[] := '{}';
  v_ord integer[] := '{}'; v_res_ids bigint[] := '{}'; v_verdicts text[] := '{}';
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
    ELSIF a.verdict = 'admitted' THEN
      v_new := v_new || a.ord;
      v_new_ids := v_new_ids || a.job_id;
    END IF;
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
