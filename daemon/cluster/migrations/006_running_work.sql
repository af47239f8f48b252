-- 006_running_work.sql: cluster admission counts the running jobs' expected rest.
--
-- A claim takes its jobs' work out of the counters, and sandglass_admit (005) read nothing
-- else: with every worker of the cluster busy it predicted a newcomer's start as if the running
-- jobs ended now, up to one run time too early, and admitted jobs that then could not start in
-- time. A lone daemon adds the running jobs' expected rest ÷ workers whenever no worker is idle
-- (RuntimeCore::load_for); so does the cluster now. Each node reports, with its heartbeat, how
-- many jobs it holds (busy) and the sum of their expected rest (claimed at + the kind's tail
-- estimate − now, at least zero); admission takes the time since the report off each node's
-- sum. Nodes of 003–005 call the three-argument heartbeat, leave busy at 0, and so count as
-- idle: the cluster then admits as before.

ALTER TABLE sandglass_nodes
  ADD COLUMN busy integer NOT NULL DEFAULT 0,            -- jobs the node holds (claimed, not ended)
  ADD COLUMN running_rest_us bigint NOT NULL DEFAULT 0,  -- their expected rest at running_at
  ADD COLUMN running_at timestamptz;

-- 003's heartbeat, plus the node's running work.
CREATE FUNCTION sandglass_heartbeat(p_owner text, p_committed bigint[], p_attempts integer[],
                                    p_busy integer, p_running_rest_us bigint)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF cardinality(p_committed) > 0 THEN
    UPDATE sandglass_jobs j SET committed = true
      FROM unnest(p_committed, p_attempts) AS c(id, at)
     WHERE j.id = ANY (p_committed) AND j.id = c.id AND j.attempt = c.at
       AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running';
  END IF;
  UPDATE sandglass_nodes
     SET heartbeat_at = clock_timestamp(), busy = p_busy, running_rest_us = p_running_rest_us,
         running_at = clock_timestamp()
   WHERE owner = p_owner;
  RETURN FOUND;
END $$;

-- 005's sandglass_admit with the running term; the rest is unchanged.
CREATE OR REPLACE FUNCTION sandglass_admit(p_kinds text[], p_args text[], p_priorities smallint[],
                                p_keys text[], p_fingerprints text[], p_remaining_us bigint[],
                                p_budget_us bigint[], p_work_us bigint[], p_tail_us bigint[],
                                p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text, inserted boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer; v_class integer; v_id bigint; v_fp text; v_queued bigint; v_workers bigint;
  v_capacity bigint; v_ahead bigint; v_busy bigint; v_running bigint;
  v_work bigint[] := ARRAY[0, 0, 0, 0];   -- queued work per class (index class + 1)
  c record;
BEGIN
  SELECT coalesce(sum(sc.queued), 0) INTO v_queued FROM sandglass_counters sc;
  FOR c IN SELECT sc.priority AS cl, sum(sc.work_us) AS w FROM sandglass_counters sc GROUP BY sc.priority LOOP
    IF c.cl BETWEEN 0 AND 3 THEN v_work[c.cl + 1] := c.w; END IF;
  END LOOP;
  -- The running jobs' expected rest as the live nodes last reported it, less the time since.
  SELECT coalesce(sum(n.workers), 0), coalesce(sum(n.capacity), 0),
         coalesce(sum(least(n.busy, n.workers)), 0),
         coalesce(sum(greatest(0, n.running_rest_us - floor(extract(epoch FROM
                  (clock_timestamp() - n.running_at)) * 1000000)::bigint)), 0)
    INTO v_workers, v_capacity, v_busy, v_running
    FROM sandglass_nodes n
   WHERE n.heartbeat_at > clock_timestamp() - p_lease_ms * interval '1 millisecond';
  -- As a lone daemon's admission: running work delays a newcomer only while no worker is idle.
  IF v_busy < v_workers THEN v_running := 0; END IF;
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
    IF p_tail_us[i] > 0 AND v_workers > 0 AND (v_ahead + v_running) / v_workers + p_tail_us[i] > p_remaining_us[i] THEN
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
