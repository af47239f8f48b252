-- functions.sql: every function of cluster mode, each written once with its current body.
--
-- Applied by `migrate` (daemon/cluster/migrations.cpp) after the numbered schema files, at every
-- node start and by `sandglassd --migrate`, in one transaction: every statement here is
-- CREATE OR REPLACE, so applying the file twice is the same as once. A change of a function's
-- body is made here. A change of its arguments or result type is a new numbered file that drops
-- the old function (CREATE OR REPLACE cannot change those, and a new argument list would leave
-- the old one beside it), followed by the new definition here.
--
-- The database's clock is the only clock (001_schema.sql): every comparison of a deadline with
-- "now" is made here by clock_timestamp(), and nodes only ever receive remaining durations.
--
-- Lock order (no deadlock). A transaction that holds several counter rows takes them in
-- ascending class. Advisory locks, each key used for nothing else:
--   7170734562315111681  schema migrations (session level, migrations.cpp)
--   7170734562315111682  one sweeper at a time (sandglass_sweep, try-lock)
--   7170734562315111683  hungry nodes' wake-ups ("Hungry nodes")
--   7170734562315111684  admission of a batch, or of due delayed jobs ("Admission and intake")
--   7170734562315111685  one forgetter at a time (sandglass_forget, try-lock)
-- A submission locks its job rows (inserts, keyed waits, attaches) first, then takes 683 shared,
-- then 684, then its admissions' counter rows; sandglass_promote_due takes 683 shared, 684, its
-- due rows (SKIP LOCKED), then its admissions' counter rows. A claim locks its job rows with
-- SKIP LOCKED, then may take 683 exclusively, then its hunger row and its other counter rows.
-- Only holders of 684 write admissions' counter rows (006_intake_counters.sql), so a holder of
-- 684 waits for nothing but the commit.

-- ---------------------------------------------------------------------------------------------
-- Counters

-- Changes a node's counter of one class (not its admissions' row: 006_intake_counters.sql) by
-- p_queued jobs and p_work_us work.
CREATE OR REPLACE FUNCTION sandglass_count(p_node text, p_priority smallint, p_queued bigint, p_work_us bigint)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO sandglass_counters AS c (node, priority, queued, work_us)
  VALUES (p_node, p_priority, p_queued, p_work_us)
  ON CONFLICT (node, priority, intake) DO UPDATE
    SET queued = c.queued + EXCLUDED.queued, work_us = c.work_us + EXCLUDED.work_us;
$$;

-- Changes a node's counters of all four classes by p_queued[class + 1] jobs and p_work_us[...]
-- work in one statement, taking the rows in ascending class: its admissions' rows when
-- p_intake (only under the admission lock), else its other rows. A plpgsql statement, so its
-- plan is cached per session (a call of an SQL function is planned again every time).
CREATE OR REPLACE FUNCTION sandglass_count_classes(p_node text, p_queued bigint[], p_work_us bigint[],
                                                   p_intake boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sandglass_counters AS c (node, priority, intake, queued, work_us)
  SELECT p_node, (k - 1)::smallint, p_intake, p_queued[k], p_work_us[k]
    FROM generate_series(1, 4) AS k
   WHERE p_queued[k] <> 0 OR p_work_us[k] <> 0
   ORDER BY k
  ON CONFLICT (node, priority, intake) DO UPDATE
    SET queued = c.queued + EXCLUDED.queued, work_us = c.work_us + EXCLUDED.work_us;
END $$;

-- ---------------------------------------------------------------------------------------------
-- Announced outcomes
--
-- A node learns of ended jobs from NOTIFYs, lines "ID KIND RUN_US" (RUN_US -1: the job never
-- ran; read by daemon/cluster/listener.cpp), on two kinds of channel:
-- - its own outcome channel (sandglass_channel('outcome', node name)): the outcomes of the jobs
--   it has a client waiting for, and only those. The row's awaited_by names the nodes waiting
--   (node names, not incarnations: a waiter outlives a lost lease of its node);
-- - sandglass_outcome, which every node listens to: the run times a node shares (p_share of
--   sandglass_finish_claim, all outcomes of one exchange per kShareRunTimes:
--   daemon/cluster/run_time_sharing.hpp), a sample every node needs for its estimates, and the
--   outcome of an awaited row that names no node (awaited_by NULL: a row no function marked).
-- So a node parses the outcomes it waits for plus the shared samples, never every outcome of
-- the cluster. Every transaction that calls pg_notify takes PostgreSQL's one NOTIFY lock of the
-- whole server at commit, so announcing outcomes nobody reads serialises every node's commits.
--
-- awaited (and awaited_by) are set at insert when the submitter waits, and by a submission or
-- a reader (GET ?wait=true, DELETE) that attaches to the job and waits (sandglass_await).
-- Every function that ends a job announces it when the row it ended is awaited. "A waiter
-- attaches while the job ends" loses no answer: both are UPDATEs of the same row, and under
-- READ COMMITTED the later one works on the newest version. If the outcome is written first,
-- the attach sees the row done and the node reads the record at once (intake.cpp); if the
-- attach is first, the outcome write sees the waiter's node in the row it updates and announces
-- it there (the listener keeps recent outcomes, should the NOTIFY come before the waiter is
-- registered). Nobody removes a waiting node from a committed row (only the inserting
-- transaction sets awaited back to false, on its own keyed row).

-- A node's channel for `p_what` ('outcome', or 'cancel' of an incarnation: p_name is then the
-- owner): a hash, so that any name gives a lower-case identifier within PostgreSQL's 63 bytes
-- that LISTEN takes unquoted.
CREATE OR REPLACE FUNCTION sandglass_channel(p_what text, p_name text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'sandglass_' || p_what || '_' || md5(p_name) $$;

-- NOTIFYs `p_lines` on `p_channel`, newline-separated, one NOTIFY per about 7,900 bytes
-- (PostgreSQL refuses payloads of 8,000 bytes).
CREATE OR REPLACE FUNCTION sandglass_notify_lines(p_channel text, p_lines text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_payload text := ''; v_line text;
BEGIN
  FOREACH v_line IN ARRAY coalesce(p_lines, '{}') LOOP
    IF v_payload <> '' AND octet_length(v_payload) + octet_length(v_line) >= 7900 THEN
      PERFORM pg_notify(p_channel, v_payload);
      v_payload := '';
    END IF;
    v_payload := CASE WHEN v_payload = '' THEN v_line ELSE v_payload || E'\n' || v_line END;
  END LOOP;
  IF v_payload <> '' THEN PERFORM pg_notify(p_channel, v_payload); END IF;
END $$;

-- Tells that these jobs ended: with p_share, every one on sandglass_outcome (a run-time sample
-- for every node; the waiters listen there too); else the awaited ones, each on the channels of
-- the nodes waiting for it. A kind's newlines become spaces and it is cut at 200 characters, so
-- a line always fits.
CREATE OR REPLACE FUNCTION sandglass_notify_outcomes(p_ids bigint[], p_kinds text[], p_run_us bigint[],
                                                     p_share boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT coalesce(sandglass_channel('outcome', w.node), 'sandglass_outcome') AS channel,
           array_agg(o.id::text || ' ' || left(translate(o.kind, E'\n\r', '  '), 200) || ' '
                     || coalesce(o.run_us, -1)::text ORDER BY o.n) AS lines
      FROM unnest(p_ids, p_kinds, p_run_us) WITH ORDINALITY AS o(id, kind, run_us, n)
      LEFT JOIN sandglass_jobs j ON NOT p_share AND j.id = o.id
      LEFT JOIN LATERAL unnest(j.awaited_by) AS w(node) ON true
     WHERE p_share OR j.awaited
     GROUP BY 1
  LOOP
    PERFORM sandglass_notify_lines(r.channel, r.lines);
  END LOOP;
END $$;

-- Ends a job with an outcome decided in the database, announced when the job is awaited.
CREATE OR REPLACE FUNCTION sandglass_end(p_id bigint, p_kind text, p_state text, p_reason text,
                                         p_cause text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sandglass_jobs SET state = 'done', outcome_state = p_state, reason = p_reason,
         cause = p_cause, finished_at = clock_timestamp()
   WHERE id = p_id;
  PERFORM sandglass_notify_outcomes(ARRAY[p_id], ARRAY[p_kind], NULL);
END $$;

-- Marks the jobs of p_ids (ascending, so that two callers lock them in the same order) as
-- awaited by the node p_node, unless they are already. Called by a submission that attaches to
-- them and waits, and by a reader that waits.
CREATE OR REPLACE FUNCTION sandglass_await(p_ids bigint[], p_node text)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF coalesce(cardinality(p_ids), 0) = 0 THEN RETURN; END IF;
  UPDATE sandglass_jobs j
     SET awaited = true,
         awaited_by = CASE WHEN p_node = ANY (coalesce(j.awaited_by, '{}')) THEN j.awaited_by
                           ELSE array_append(j.awaited_by, p_node) END
   WHERE j.id = ANY (p_ids) AND (NOT j.awaited OR NOT (p_node = ANY (coalesce(j.awaited_by, '{}'))));
END $$;

-- ---------------------------------------------------------------------------------------------
-- Nodes and leases
--
-- A node's row says when it last beat (heartbeat_at), how long its lease is (lease_ms), since
-- when it has beaten without a gap (beating_since) and whether a sweep has judged it lost (lost).
-- Only a sweep sets lost, and it takes back only lost owners' jobs (or those of owners without a
-- row): so a row that is not lost still holds all its running jobs, whatever its heartbeat_at
-- says, and its node's next beat is answered "alive". A beat of a lost row is answered "lost":
-- the node cancels what it holds and comes back as a new incarnation (a new owner). The sweep's
-- UPDATE and a beat's UPDATE of one row are serialised by the row's lock, and each re-reads the
-- row the other committed (READ COMMITTED): either the beat comes first and the sweep finds it
-- fresh, or the sweep comes first and the beat finds it lost.
--
-- An outage is nobody's fault. While the database is down or unreachable, every node's lease
-- seems to lapse. A sweeper judges others only after it has itself beaten without a gap for a
-- whole lease since the server started (pg_postmaster_start_time) and since its own last gap: a
-- peer that is alive had that same lease to reconnect and beat (its beats are a heartbeat apart,
-- its reconnect back-off is shorter than the lease), so a peer still silent after it is not
-- alive, or cannot reach the database, which is the peer's own fault.
--
-- A claim, and a claim at insert, require the claimer's own fresh row (sandglass_holds_lease):
-- a node whose lease may have lapsed claims nothing (its watchdog also stops it first,
-- daemon/cluster/node_lease.hpp).

-- Every node row has its hunger row ("Hungry nodes"); a node starts hungry.
CREATE OR REPLACE FUNCTION sandglass_hunger_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sandglass_hunger (owner) VALUES (NEW.owner) ON CONFLICT (owner) DO NOTHING;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sandglass_hunger_row AFTER INSERT ON sandglass_nodes
  FOR EACH ROW EXECUTE FUNCTION sandglass_hunger_row();

-- The application_name of an incarnation's sessions: a sweep that judges it lost ends them (a
-- paused node's LISTEN session would hold back every node's notification queue; its other
-- sessions may hold locks). Names are cut to the server's 63 bytes.
CREATE OR REPLACE FUNCTION sandglass_session_name(p_owner text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT left('sandglassd ' || p_owner, 63) $$;

-- A node joins as incarnation p_owner of the name p_node, unless a live incarnation of that
-- name (not lost, beaten within its lease) holds it: then nothing is written and that owner is
-- returned (NULL: joined). Earlier incarnations of the name are gone (killed, restarted, or this
-- node's own lost one): judged lost here, so that a sweep takes back their jobs. Two joins of
-- one name are serialised by an advisory lock on the name.
CREATE OR REPLACE FUNCTION sandglass_join(p_owner text, p_node text, p_workers integer, p_capacity integer,
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

-- A beat of p_owner with its running work: busy, the jobs it holds, and running_rest_us, the
-- sum of their expected rest (claimed at + the kind's tail estimate - now, at least zero), for
-- cluster admission, and p_standing_target_us, its standing-queue detector's target delay while
-- it sees a standing queue, else 0 (the standing-queue rule, "Admission and intake"). True: alive, the row holds all its jobs. False: lost (a sweep judged it so,
-- or it has no row): it holds nothing any more. A gap in the beats longer than the lease, or a
-- server restart since the last beat, starts a new run of beats (beating_since).
CREATE OR REPLACE FUNCTION sandglass_beat(p_owner text, p_lease_ms bigint, p_busy integer,
                               p_running_rest_us bigint, p_standing_target_us bigint)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
  UPDATE sandglass_nodes n
     SET beating_since = CASE WHEN n.heartbeat_at < pg_postmaster_start_time()
                                OR n.heartbeat_at < v_now - p_lease_ms * interval '1 millisecond'
                              THEN v_now ELSE n.beating_since END,
         heartbeat_at = v_now, lease_ms = p_lease_ms, busy = p_busy,
         running_rest_us = p_running_rest_us, running_at = v_now,
         standing_target_us = greatest(p_standing_target_us, 0)
   WHERE n.owner = p_owner AND NOT n.lost;
  RETURN FOUND;
END $$;

-- Whether p_owner may claim now: it has a row, not lost, that has beaten within its lease.
CREATE OR REPLACE FUNCTION sandglass_holds_lease(p_owner text, p_now timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM sandglass_nodes n
                  WHERE n.owner = p_owner AND NOT n.lost
                    AND (n.lease_ms IS NULL
                         OR n.heartbeat_at > p_now - n.lease_ms * interval '1 millisecond'));
$$;

-- ---------------------------------------------------------------------------------------------
-- Admission and intake
--
-- The same order and reasons as a lone daemon: queue_full (the whole cluster's capacity), then
-- deadline_implausible (the work queued ahead in the job's class and above, plus the running
-- jobs' expected rest while none of the workers that could run it is idle, divided by those
-- workers, plus the kind's tail estimate, against the time left). Only live nodes (beaten
-- within the lease) count, and for a kind only those that serve it (sandglass_nodes.kinds,
-- NULL: every kind). The running term is each node's reported rest less the time since.
--
-- Atomic admission. Each submission decides its batch against the counters, then writes its
-- counter changes; two statements that read the same counters could each admit the queue's last
-- places. So the decision that counts is made under the advisory lock 7170734562315111684, held
-- from before it reads the counters to the commit. To keep that section short (every node's
-- submissions pass through it one at a time), a submission decides twice: first without the
-- lock (sandglass_admit: the refusals then cost no insert), inserts what that pass admitted,
-- then takes the lock and decides those jobs again (sandglass_admission_verdicts) against the
-- counters as every committed submission left them; a job this second pass refuses is deleted
-- again and answered with its reason. Inside the lock only the counters are read, the verdicts
-- decided and its admissions' counter rows written, rows no one but a holder of the lock
-- writes (006_intake_counters.sql). So a holder waits for nothing but its commit: not for a job
-- row (a submission has made its inserts, keyed waits and attaches before it asks for the lock;
-- sandglass_promote_due locks its rows with SKIP LOCKED), not for a claim's counter row, and
-- not for 683 (taken shared before it, "Hungry nodes").
--
-- The standing-queue rule, as a lone daemon's (runtime/standing_queue.hpp). Each node detects a
-- standing queue from its own claims (daemon/cluster/claimer.cpp, "The standing queue"): the
-- queue wait of each job it claims (waited_us, sandglass_claim) is a sojourn, and a whole
-- interval of them above the target says a queue stands; the node holds that verdict until one
-- of its claims finds nothing queued of its kinds. Its beat reports the target delay while it
-- holds it, else 0 (sandglass_nodes.standing_target_us). For a job's kind, the queue stands when
-- every live node that serves the kind reports one: a node that has not waited an interval of
-- long waits, or whose claim just found nothing, sees a queue its workers drain (a job admitted
-- now would be claimed soon), and one such node is enough. While it stands, a job is admitted
-- only if predicted to start within the largest target those nodes report: the work queued
-- ahead in its class and above / the kind's workers, the time until a worker takes it after the
-- jobs ahead. The running jobs' rest is left out: the nodes report it by their tail estimates
-- (the worst case deadline_implausible needs), which with every worker busy alone exceeds a
-- target of two mean runs and would refuse everything until the queue had emptied. Bursts are
-- still absorbed: a node says its queue stands only after a whole interval of waits above the
-- target. An urgent job still overtakes: its work ahead is only its class and above. A refusal
-- is the verdict 'standing_queue START_US TARGET_US' (the predicted start and the target, for
-- the 503's text and Retry-After); its reason is queue_full, as a lone daemon's.
--
-- Intake tokens. A node gives every submission a random token (sandglass_jobs.intake_token),
-- written with the row it inserts. When the connection breaks while a submission's statement
-- ran, its COMMIT may or may not have happened: the node ends the old session's server process
-- (so it cannot commit later), then looks the tokens up on a new session (intake.cpp): a row
-- found is the job, answered as admitted; a token not found was never inserted, so trying the
-- submission once more cannot insert it twice.

-- The admission rule, the one place it is written: a verdict for each job i with p_decide[i]
-- (NULL for the others): admitted, queue_full, deadline_implausible or 'standing_queue START_US
-- TARGET_US' (the standing-queue rule, above). The counters and the
-- live nodes are read once; the jobs are decided in class order (then as given), each against
-- what the jobs decided before it left. Exact only for a caller that holds the admission lock
-- 7170734562315111684 to its commit.
CREATE OR REPLACE FUNCTION sandglass_admission_verdicts(p_kinds text[], p_priorities smallint[],
                                                        p_remaining_us bigint[], p_work_us bigint[],
                                                        p_tail_us bigint[], p_lease_ms bigint,
                                                        p_decide boolean[])
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  i integer; v_class integer; v_queued bigint; v_capacity bigint; v_ahead bigint; v_at integer;
  v_now timestamptz := clock_timestamp();
  v_out text[] := array_fill(NULL::text, ARRAY[coalesce(cardinality(p_kinds), 0)]);
  v_work bigint[] := ARRAY[0, 0, 0, 0];   -- queued work per class (index class + 1)
  v_names text[];                         -- the batch's kinds, and per kind (same index):
  v_workers bigint[];                     --   the workers of the live nodes that serve it
  v_running bigint[];                     --   their running jobs' expected rest (0: one is idle)
  v_standing bigint[];                    --   the standing-queue target (0: no queue stands)
  v_start bigint;
  c record;
BEGIN
  IF NOT (true = ANY (p_decide)) THEN RETURN v_out; END IF;
  SELECT coalesce(sum(sc.queued), 0) INTO v_queued FROM sandglass_counters sc;
  FOR c IN SELECT sc.priority AS cl, sum(sc.work_us) AS w FROM sandglass_counters sc GROUP BY sc.priority LOOP
    IF c.cl BETWEEN 0 AND 3 THEN v_work[c.cl + 1] := c.w; END IF;
  END LOOP;
  SELECT coalesce(sum(n.capacity), 0) INTO v_capacity FROM sandglass_nodes n
   WHERE n.heartbeat_at > v_now - p_lease_ms * interval '1 millisecond';
  -- Per kind, as a lone daemon's admission: running work delays a newcomer only while none of
  -- the workers that could run it is idle.
  SELECT array_agg(k.name ORDER BY k.name), array_agg(k.workers ORDER BY k.name),
         array_agg(CASE WHEN k.busy < k.workers THEN 0 ELSE k.running END ORDER BY k.name),
         array_agg(k.standing ORDER BY k.name)
    INTO v_names, v_workers, v_running, v_standing
    FROM (SELECT u.name, coalesce(sum(n.workers), 0)::bigint AS workers,
                 CASE WHEN bool_and(n.standing_target_us > 0) THEN max(n.standing_target_us)
                      ELSE 0 END AS standing,
                 coalesce(sum(least(n.busy, n.workers)), 0)::bigint AS busy,
                 coalesce(sum(greatest(0, n.running_rest_us - floor(extract(epoch FROM
                          (v_now - n.running_at)) * 1000000)::bigint)), 0)::bigint AS running
            FROM (SELECT DISTINCT p_kinds[x.n] AS name
                    FROM generate_series(1, cardinality(p_kinds)) AS x(n) WHERE p_decide[x.n]) u
            LEFT JOIN sandglass_nodes n
              ON n.heartbeat_at > v_now - p_lease_ms * interval '1 millisecond'
             AND (n.kinds IS NULL OR u.name = ANY (n.kinds))
           GROUP BY u.name) k;
  FOR i IN
    SELECT o.n FROM unnest(p_priorities) WITH ORDINALITY AS o(pr, n)
     WHERE p_decide[o.n] ORDER BY o.pr, o.n
  LOOP
    v_class := p_priorities[i] + 1;
    IF v_capacity > 0 AND v_queued >= v_capacity THEN
      v_out[i] := 'queue_full'; CONTINUE;
    END IF;
    v_ahead := 0;
    FOR k IN 1 .. v_class LOOP v_ahead := v_ahead + v_work[k]; END LOOP;
    v_at := array_position(v_names, p_kinds[i]);
    IF p_tail_us[i] > 0 AND v_workers[v_at] > 0
       AND (v_ahead + v_running[v_at]) / v_workers[v_at] + p_tail_us[i] > p_remaining_us[i] THEN
      v_out[i] := 'deadline_implausible'; CONTINUE;
    END IF;
    -- The standing-queue rule (above).
    IF v_standing[v_at] > 0 AND v_workers[v_at] > 0 THEN
      v_start := v_ahead / v_workers[v_at];
      IF v_start > v_standing[v_at] THEN
        v_out[i] := format('standing_queue %s %s', v_start, v_standing[v_at]); CONTINUE;
      END IF;
    END IF;
    v_queued := v_queued + 1;
    v_work[v_class] := v_work[v_class] + p_work_us[i];
    v_out[i] := 'admitted';
  END LOOP;
  RETURN v_out;
END $$;

-- Admission of a batch by the rule above (sandglass_admission_verdicts, deciding every job no
-- key settles first). A keyed job is attached (a job with its key exists with the same
-- fingerprint), a conflict, or, when admitted, inserted here (queued; inserted true); an
-- admitted job without a key gets its id reserved (inserted false) for the caller to insert.
-- Rows come in the order decided; the admission lock, counting and NOTIFY are the caller's.
CREATE OR REPLACE FUNCTION sandglass_admit(p_kinds text[], p_args text[], p_priorities smallint[],
                                p_keys text[], p_fingerprints text[], p_remaining_us bigint[],
                                p_budget_us bigint[], p_work_us bigint[], p_tail_us bigint[],
                                p_lease_ms bigint, p_tokens uuid[])
RETURNS TABLE (ord integer, job_id bigint, verdict text, inserted boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer; v_id bigint; v_fp text; v_n integer := coalesce(cardinality(p_kinds), 0);
  v_decide boolean[] := array_fill(true, ARRAY[coalesce(cardinality(p_kinds), 0)]);
  v_settled_ids bigint[] := array_fill(NULL::bigint, ARRAY[coalesce(cardinality(p_kinds), 0)]);
  v_settled text[] := array_fill(NULL::text, ARRAY[coalesce(cardinality(p_kinds), 0)]);
  v_verdicts text[];
BEGIN
  FOR i IN 1 .. v_n LOOP  -- a key an existing job holds settles its job: attached or a conflict
    IF p_keys[i] IS NOT NULL THEN
      SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_keys[i];
      IF FOUND THEN
        v_decide[i] := false;
        v_settled_ids[i] := v_id;
        v_settled[i] := CASE WHEN v_fp = p_fingerprints[i] THEN 'attached' ELSE 'conflict' END;
      END IF;
    END IF;
  END LOOP;
  v_verdicts := sandglass_admission_verdicts(p_kinds, p_priorities, p_remaining_us, p_work_us,
                                             p_tail_us, p_lease_ms, v_decide);
  FOR i IN
    SELECT o.n FROM unnest(p_priorities) WITH ORDINALITY AS o(pr, n) ORDER BY o.pr, o.n
  LOOP
    ord := i; inserted := false; job_id := NULL;
    IF NOT v_decide[i] THEN
      job_id := v_settled_ids[i]; verdict := v_settled[i];
      RETURN NEXT;
      CONTINUE;
    END IF;
    verdict := v_verdicts[i];
    IF verdict <> 'admitted' THEN RETURN NEXT; CONTINUE; END IF;
    IF p_keys[i] IS NOT NULL THEN
      v_id := NULL;
      INSERT INTO sandglass_jobs (kind, args, priority, idempotency_key, fingerprint, budget_us,
                                  work_us, deadline, intake_token)
      VALUES (p_kinds[i], p_args[i], p_priorities[i], p_keys[i], p_fingerprints[i], p_budget_us[i],
              p_work_us[i], clock_timestamp() + p_remaining_us[i] * interval '1 microsecond',
              p_tokens[i])
      ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING id INTO v_id;
      IF v_id IS NULL THEN  -- inserted since the look-up above (by another node, or this batch)
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
    job_id := v_id;
    RETURN NEXT;
  END LOOP;
END $$;

-- ---------------------------------------------------------------------------------------------
-- Hungry nodes
--
-- sandglass_queued is sent only when a live node may be waiting for it. A node claiming a full
-- share has no use for the wake-up: each of its jobs that ends is written by an exchange that
-- also claims (claimer.cpp), so it looks at the queue again anyway. Only a node whose last
-- claim came back short waits (for a NOTIFY, or its bounded poll, poll_ms).
--
-- sandglass_hunger.hungry says the node's last claim got fewer jobs than it asked for.
-- sandglass_claim sets it when a claim comes back short and clears it when one gets all it
-- asked for; a submission that queues a job sends sandglass_queued only when some live node is
-- hungry (sandglass_wake_hungry). A node without a hunger row counts as hungry. A job queued
-- again by the sweep or a take-back is announced unconditionally (a rare path). A node past its
-- lease gets no NOTIFY (its jobs are the sweep's; it polls).
--
-- No lost wake-up. The race: a claim's snapshot misses a submission's rows (they commit later),
-- and the submission read hungry = false (the claim's update commits later). The advisory lock
-- 7170734562315111683 closes it:
-- - a submission that may queue takes it shared (submissions do not wait for one another) and
--   holds it to its commit; it reads hungry only after that, in a statement of its own (a
--   statement of a volatile function reads a snapshot taken when it starts);
-- - a claim that comes back short while its node is not hungry takes it exclusively, sets
--   hungry, and claims once more, with a new snapshot.
-- A submission that read hungry = false took the lock before the claim did, so the claim's
-- second pass waited for its commit and sees its rows. A submission that took it after reads
-- hungry = true and sends the NOTIFY. Clearing hungry needs no lock: the node got all it asked
-- for, so it claims again as soon as any of those jobs ends.
--
-- No deadlock. The claim holds the exclusive lock only at the end of its statement: its
-- outcomes are written, its claimed rows are locked by SKIP LOCKED (it waits for no job row),
-- then it waits for its hunger row and its counter rows. A submission takes the shared lock
-- after its waits for job rows (keyed inserts, sandglass_await) and before the admission lock;
-- what it locks after it (the admission lock, its admissions' counter rows) a claim never holds.
--
-- Idle claims. A hungry node claims every poll_ms. Its claim first asks
-- sandglass_nothing_to_claim, a few index descents, and returns at once when there is no queued
-- job of its kinds and no expired head to retire. The answer is as good as the walk's: a job it
-- misses was not committed when it looked, and its submission either saw the node hungry (it
-- sends the NOTIFY) or came before the node turned hungry (that claim's second pass saw it).

-- Sends sandglass_queued for each of p_kinds when a live node is hungry. The caller holds the
-- advisory lock 7170734562315111683 shared.
CREATE OR REPLACE FUNCTION sandglass_wake_hungry(p_kinds text[], p_lease_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(p_kinds), 0) = 0 THEN RETURN; END IF;
  IF EXISTS (SELECT 1 FROM sandglass_nodes n
              WHERE n.heartbeat_at > clock_timestamp() - p_lease_ms * interval '1 millisecond'
                AND NOT EXISTS (SELECT 1 FROM sandglass_hunger h WHERE h.owner = n.owner AND NOT h.hungry)) THEN
    PERFORM pg_notify('sandglass_queued', kn.name) FROM unnest(p_kinds) AS kn(name);
  END IF;
END $$;

-- Whether a claim of p_kinds at p_now would find nothing: no queued job of those kinds, and no
-- queued job past its deadline (to retire). Each test is a min() over an index column, one
-- descent per kind and per class; without enable_seqscan = off the generic plan of the kind
-- test is a scan of the table (with one kind queued, the planner expects a hit in the first
-- row it reads).
CREATE OR REPLACE FUNCTION sandglass_nothing_to_claim(p_kinds text[], p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  RETURN NOT EXISTS (SELECT 1 FROM unnest(p_kinds) AS k(name)
                      WHERE (SELECT min(j.kind) FROM sandglass_jobs j
                              WHERE j.state = 'queued' AND j.kind = k.name) IS NOT NULL)
     AND NOT EXISTS (SELECT 1 FROM generate_series(0, 3) AS c(cl)
                      WHERE (SELECT min(j.deadline) FROM sandglass_jobs j
                              WHERE j.state = 'queued' AND j.priority = c.cl) <= p_now);
END $$;

-- ---------------------------------------------------------------------------------------------
-- Submissions and claims
--
-- Functions a node runs per job use one plan per session (plan_cache_mode =
-- force_generic_plan; a function's SET holds for the functions it calls too). Each generic plan
-- was read with EXPLAIN: the claim's candidates are index scans in claim order per kind
-- (sandglass_jobs_claim) and per class (sandglass_jobs_queue), rows named by id are primary-key
-- lookups, the counters are a few rows. Outcomes and commit marks test the
-- owner and the state with IS NOT DISTINCT FROM, which no index serves (neither is NULL on a
-- running row: the same test as =): with a queue table's stale statistics the planner would
-- otherwise walk the index of running rows by owner, which holds an entry for every job the
-- owner ever ran until vacuum, instead of looking up the ids.

-- The elements of p_a at the places p_at, in that order; all of p_a when p_at is NULL.
CREATE OR REPLACE FUNCTION sandglass_pick(p_a anyarray, p_at integer[])
RETURNS anyarray LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_at IS NULL THEN p_a
              ELSE ARRAY(SELECT p_a[u.k] FROM unnest(p_at) WITH ORDINALITY AS u(k, n) ORDER BY u.n) END;
$$;

-- Admission and insert of a batch (sandglass_admit), in one statement and one commit, with
-- claims at insert: up to p_claim of the admitted unkeyed jobs of the kinds in p_served that
-- come before every queued job of those kinds (class, then deadline; queued rows past their
-- deadline do not count: a claim retires them) are inserted running, owner p_owner, attempt 1,
-- in claim order, when p_owner holds its lease. Such a job is never queued: it never enters the
-- counters and sends no NOTIFY. verdict 'claimed' names them, with the time they have left by
-- this clock; the others: admitted, attached, conflict, queue_full, deadline_implausible,
-- standing_queue START_US TARGET_US (sandglass_admit).
-- p_wait[i] says the submitter of job i waits for its outcome: a job inserted here is awaited
-- when its submitter waits; a job attached to by a waiting submitter becomes awaited. p_tokens:
-- the intake tokens ("Admission and intake").
-- A job with p_delay_us[i] > 0 is not admitted now: it is inserted `scheduled`, to start at this
-- clock + its delay with its deadline as many microseconds later (verdict 'scheduled'; a keyed
-- one may be attached or a conflict instead); sandglass_promote_due admits it at its start.
-- p_retry_max[i] and p_retry_backoff_us[i] are job i's retry spec (NULL: none), for the node
-- that claims it.
CREATE OR REPLACE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
                                       p_served text[], p_kinds text[], p_args text[],
                                       p_priorities smallint[], p_keys text[],
                                       p_fingerprints text[], p_remaining_us bigint[],
                                       p_budget_us bigint[], p_work_us bigint[],
                                       p_tail_us bigint[], p_lease_ms bigint, p_wait boolean[],
                                       p_tokens uuid[], p_delay_us bigint[] DEFAULT NULL,
                                       p_retry_max integer[] DEFAULT NULL,
                                       p_retry_backoff_us bigint[] DEFAULT NULL)
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
  v_now_ords integer[];            -- the jobs admitted now, by their place (NULL: all of them)
  v_later integer[];               -- the delayed ones
  v_keyed_new bigint[] := '{}'; v_keyed_ords integer[] := '{}';  -- keyed rows admit inserted
  v_decide boolean[]; v_check text[];  -- the second pass, under the admission lock
  v_gone bigint[] := '{}'; v_gone_verdicts text[] := '{}';  -- rows it refused, and why
  v_id bigint; v_fp text;
BEGIN
  SELECT coalesce(array_agg(u.n ORDER BY u.n) FILTER (WHERE coalesce(p_delay_us[u.n], 0) <= 0), '{}'),
         coalesce(array_agg(u.n ORDER BY u.n) FILTER (WHERE p_delay_us[u.n] > 0), '{}')
    INTO v_now_ords, v_later
    FROM generate_series(1, coalesce(cardinality(p_kinds), 0)) AS u(n);
  IF cardinality(v_later) = 0 THEN v_now_ords := NULL; END IF;  -- no copies of the arguments
  IF v_now_ords IS NULL OR cardinality(v_now_ords) > 0 THEN
    FOR a IN
      SELECT coalesce(v_now_ords[x.ord], x.ord) AS ord, x.job_id, x.verdict, x.inserted
        FROM sandglass_admit(sandglass_pick(p_kinds, v_now_ords), sandglass_pick(p_args, v_now_ords),
                             sandglass_pick(p_priorities, v_now_ords), sandglass_pick(p_keys, v_now_ords),
                             sandglass_pick(p_fingerprints, v_now_ords),
                             sandglass_pick(p_remaining_us, v_now_ords),
                             sandglass_pick(p_budget_us, v_now_ords), sandglass_pick(p_work_us, v_now_ords),
                             sandglass_pick(p_tail_us, v_now_ords), p_lease_ms,
                             sandglass_pick(p_tokens, v_now_ords)) AS x
    LOOP
      v_ord := v_ord || a.ord; v_res_ids := v_res_ids || a.job_id; v_verdicts := v_verdicts || a.verdict;
      IF a.verdict = 'admitted' AND a.inserted THEN  -- keyed: queued already
        IF NOT p_wait[a.ord] THEN v_unawaited := v_unawaited || a.job_id; ELSE v_attach := v_attach || a.job_id; END IF;
        v_keyed_new := v_keyed_new || a.job_id; v_keyed_ords := v_keyed_ords || a.ord;
      ELSIF a.verdict = 'admitted' THEN
        v_new := v_new || a.ord;
        v_new_ids := v_new_ids || a.job_id;
      ELSIF a.verdict = 'attached' AND p_wait[a.ord] THEN
        v_attach := v_attach || a.job_id;
      END IF;
    END LOOP;
  END IF;
  -- Keyed rows sandglass_admit inserted take their retry spec here (only this transaction
  -- knows them yet).
  IF cardinality(v_keyed_new) > 0 THEN
    UPDATE sandglass_jobs j SET retry_max = p_retry_max[k.o], retry_backoff_us = p_retry_backoff_us[k.o]
      FROM unnest(v_keyed_new, v_keyed_ords) AS k(id, o)
     WHERE j.id = k.id AND p_retry_max[k.o] IS NOT NULL;
  END IF;
  -- Delayed jobs: scheduled rows, in no counter (no work ahead of anyone until their start).
  FOREACH i IN ARRAY v_later LOOP
    v_id := NULL;
    v_now := clock_timestamp();  -- created then: its start and deadline count from it
    INSERT INTO sandglass_jobs (id, kind, args, priority, idempotency_key, fingerprint, budget_us,
                                work_us, created_at, start_at, deadline, state, awaited,
                                awaited_by, intake_token, retry_max, retry_backoff_us)
    VALUES (nextval('sandglass_jobs_id_seq'), p_kinds[i], p_args[i], p_priorities[i],
            p_keys[i], p_fingerprints[i], p_budget_us[i], p_work_us[i], v_now,
            v_now + p_delay_us[i] * interval '1 microsecond',
            v_now + (p_delay_us[i] + p_remaining_us[i]) * interval '1 microsecond',
            'scheduled', p_wait[i], CASE WHEN p_wait[i] THEN ARRAY[p_node] END, p_tokens[i],
            p_retry_max[i], p_retry_backoff_us[i])
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO v_id;
    v_ord := v_ord || i;
    IF v_id IS NULL THEN  -- a job with this key exists
      SELECT j.id, j.fingerprint INTO v_id, v_fp FROM sandglass_jobs j WHERE j.idempotency_key = p_keys[i];
      v_res_ids := v_res_ids || v_id;
      IF v_fp = p_fingerprints[i] THEN
        v_verdicts := v_verdicts || 'attached'::text;
        IF p_wait[i] THEN v_attach := v_attach || v_id; END IF;
      ELSE
        v_verdicts := v_verdicts || 'conflict'::text;
      END IF;
    ELSE
      v_res_ids := v_res_ids || v_id; v_verdicts := v_verdicts || 'scheduled'::text;
    END IF;
  END LOOP;
  -- Keyed rows inserted by sandglass_admit took the column's default (awaited); those of
  -- submitters that do not wait are not, unless a waiting submission of this batch attached
  -- to them. Only this transaction knows these rows yet.
  IF cardinality(v_unawaited) > 0 THEN
    UPDATE sandglass_jobs j SET awaited = false
     WHERE j.id = ANY (v_unawaited) AND NOT (j.id = ANY (v_attach));
  END IF;
  PERFORM sandglass_await(ARRAY(SELECT DISTINCT x FROM unnest(v_attach) AS x ORDER BY x), p_node);

  -- Claims at insert: the unkeyed admitted jobs this node serves, in claim order, while they
  -- come before the queue's head (of the served kinds, not yet expired) and p_claim allows.
  v_now := clock_timestamp();
  v_claim := array_fill(false, ARRAY[cardinality(v_new)]);
  -- Only while this node's own row is fresh: a node past its lease may be swept meanwhile.
  IF p_claim > 0 AND cardinality(v_new) > 0 AND sandglass_holds_lease(p_owner, v_now) THEN
    SELECT h.priority, h.deadline INTO v_head_pr, v_head_dl
      FROM unnest(p_served) AS k(name) CROSS JOIN LATERAL
           (SELECT j.priority, j.deadline FROM sandglass_jobs j
             WHERE j.state = 'queued' AND j.kind = k.name AND j.deadline > v_now
             ORDER BY j.priority, j.deadline LIMIT 1) h
     ORDER BY h.priority, h.deadline LIMIT 1;
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
  -- Created, and for a claimed job claimed, at the instant its deadline counts from.
  INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, created_at, deadline,
                              state, owner, attempt, claimed_at, node_ran, awaited, awaited_by,
                              intake_token, retry_max, retry_backoff_us)
  SELECT u.id, p_kinds[u.o], p_args[u.o], p_priorities[u.o], p_budget_us[u.o], p_work_us[u.o],
         v_now, v_now + p_remaining_us[u.o] * interval '1 microsecond',
         CASE WHEN u.cl THEN 'running' ELSE 'queued' END,
         CASE WHEN u.cl THEN p_owner END,
         CASE WHEN u.cl THEN 1 ELSE 0 END,
         CASE WHEN u.cl THEN v_now END,
         CASE WHEN u.cl THEN p_node END,
         p_wait[u.o], CASE WHEN p_wait[u.o] THEN ARRAY[p_node] END, p_tokens[u.o],
         p_retry_max[u.o], p_retry_backoff_us[u.o]
    FROM unnest(v_new, v_new_ids, v_claim) AS u(o, id, cl);

  -- The decision that counts ("Atomic admission"): the inserted jobs again, under the lock,
  -- against the counters every committed submission left. A job refused now is deleted; so is
  -- the answer of a job of this batch that attached to it.
  IF cardinality(v_new) > 0 OR cardinality(v_keyed_ords) > 0 THEN
    PERFORM pg_advisory_xact_lock_shared(7170734562315111683);
    PERFORM pg_advisory_xact_lock(7170734562315111684);
    v_decide := array_fill(false, ARRAY[cardinality(p_kinds)]);
    FOREACH i IN ARRAY v_new || v_keyed_ords LOOP v_decide[i] := true; END LOOP;
    v_check := sandglass_admission_verdicts(p_kinds, p_priorities, p_remaining_us, p_work_us,
                                            p_tail_us, p_lease_ms, v_decide);
    SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(v_check[g.o]), '{}')
      INTO v_gone, v_gone_verdicts
      FROM unnest(v_new || v_keyed_ords, v_new_ids || v_keyed_new) AS g(o, id)
     WHERE v_check[g.o] <> 'admitted';
    IF cardinality(v_gone) > 0 THEN
      DELETE FROM sandglass_jobs j WHERE j.id = ANY (v_gone);
      FOR k IN 1 .. cardinality(v_ord) LOOP
        IF v_res_ids[k] = ANY (v_gone) THEN
          v_verdicts[k] := v_gone_verdicts[array_position(v_gone, v_res_ids[k])];
          v_res_ids[k] := NULL;
        END IF;
      END LOOP;
    END IF;
  END IF;
  -- What stays queued is counted: the admitted jobs not claimed at insert nor refused above.
  FOR c IN
    SELECT q.o FROM unnest(v_new || v_keyed_ords, v_new_ids || v_keyed_new,
                           v_claim || array_fill(false, ARRAY[cardinality(v_keyed_ords)])) AS q(o, id, cl)
     WHERE NOT q.cl AND NOT (q.id = ANY (v_gone))
  LOOP
    i := c.o;
    v_add[p_priorities[i] + 1] := v_add[p_priorities[i] + 1] + 1;
    v_addw[p_priorities[i] + 1] := v_addw[p_priorities[i] + 1] + p_work_us[i];
    IF NOT (p_kinds[i] = ANY (v_kinds)) THEN v_kinds := v_kinds || p_kinds[i]; END IF;
  END LOOP;
  IF cardinality(v_kinds) > 0 THEN
    PERFORM sandglass_count_classes(p_node, v_add, v_addw, true);
    PERFORM sandglass_wake_hungry(v_kinds, p_lease_ms);
  END IF;
  RETURN QUERY
    SELECT r.o, r.id,
           CASE WHEN r.v = 'admitted' AND coalesce(v_claim[array_position(v_new, r.o)], false)
                THEN 'claimed' ELSE r.v END,
           CASE WHEN r.v = 'admitted' AND coalesce(v_claim[array_position(v_new, r.o)], false)
                THEN floor(extract(epoch FROM (v_now - clock_timestamp())) * 1000000)::bigint
                     + p_remaining_us[r.o] END
      FROM unnest(v_ord, v_res_ids, v_verdicts) AS r(o, id, v);
END $$;

-- Delayed starts. Admits the scheduled jobs whose start has come (at most p_limit, earliest start
-- first) by the rule that admits submissions (sandglass_admit: each with the time left to its
-- deadline, its row's work estimate, and its kind's tail estimate among p_kinds/p_tail_us, 0 for
-- a kind not named there): an admitted one becomes queued (counted under p_node, announced to
-- hungry nodes), a refused one ends rejected with the admission's reason (queue_full, also for
-- the standing-queue rule's refusal; deadline_implausible). Lock order as a submission's: 683
-- shared, the admission lock, then the due rows (SKIP LOCKED: a row a cancel holds is due again
-- next time), then its admissions' counter rows. Returns how many were queued and rejected, and
-- the microseconds from now to the next
-- scheduled start (NULL: none scheduled; zero or less: more are due already).
CREATE OR REPLACE FUNCTION sandglass_promote_due(p_node text, p_lease_ms bigint, p_limit integer,
                                                 p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (promoted integer, refused integer, next_start_us bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  v_ids bigint[]; v_kinds text[]; v_args text[]; v_prs smallint[]; v_left bigint[];
  v_budgets bigint[]; v_works bigint[]; v_tails bigint[]; v_none text[]; v_now timestamptz;
  v_add bigint[] := ARRAY[0, 0, 0, 0]; v_addw bigint[] := ARRAY[0, 0, 0, 0];
  v_queued bigint[] := '{}'; v_queued_kinds text[] := '{}'; v_class integer; a record;
BEGIN
  promoted := 0; refused := 0;
  -- Nothing due (the usual pass): the admission lock is not taken (one descent of the index).
  IF EXISTS (SELECT 1 FROM sandglass_jobs j WHERE j.state = 'scheduled' AND j.start_at <= clock_timestamp()) THEN
    PERFORM pg_advisory_xact_lock_shared(7170734562315111683);  -- "Hungry nodes"
    PERFORM pg_advisory_xact_lock(7170734562315111684);
    v_now := clock_timestamp();
    SELECT array_agg(d.id ORDER BY d.start_at), array_agg(d.kind ORDER BY d.start_at),
           array_agg(d.args ORDER BY d.start_at), array_agg(d.priority ORDER BY d.start_at),
           array_agg(floor(extract(epoch FROM (d.deadline - v_now)) * 1000000)::bigint ORDER BY d.start_at),
           array_agg(d.budget_us ORDER BY d.start_at), array_agg(d.work_us ORDER BY d.start_at),
           array_agg(coalesce(p_tail_us[array_position(p_kinds, d.kind)], 0) ORDER BY d.start_at)
      INTO v_ids, v_kinds, v_args, v_prs, v_left, v_budgets, v_works, v_tails
      FROM (SELECT j.id, j.kind, j.args, j.priority, j.deadline, j.budget_us, j.work_us, j.start_at
              FROM sandglass_jobs j
             WHERE j.state = 'scheduled' AND j.start_at <= v_now
             ORDER BY j.start_at LIMIT p_limit
               FOR UPDATE SKIP LOCKED) d;
    IF v_ids IS NOT NULL THEN
      v_none := array_fill(NULL::text, ARRAY[cardinality(v_ids)]);  -- no keys: the rows exist
      FOR a IN
        SELECT * FROM sandglass_admit(v_kinds, v_args, v_prs, v_none, v_none, v_left, v_budgets,
                                      v_works, v_tails, p_lease_ms,
                                      array_fill(NULL::uuid, ARRAY[cardinality(v_ids)]))
      LOOP
        IF a.verdict = 'admitted' THEN
          v_class := v_prs[a.ord] + 1;
          v_add[v_class] := v_add[v_class] + 1;
          v_addw[v_class] := v_addw[v_class] + v_works[a.ord];
          v_queued := v_queued || v_ids[a.ord];
          IF NOT (v_kinds[a.ord] = ANY (v_queued_kinds)) THEN v_queued_kinds := v_queued_kinds || v_kinds[a.ord]; END IF;
        ELSE
          PERFORM sandglass_end(v_ids[a.ord], v_kinds[a.ord], 'rejected',
                                CASE WHEN a.verdict LIKE 'standing_queue %' THEN 'queue_full'
                                     ELSE a.verdict END, NULL);
          refused := refused + 1;
        END IF;
      END LOOP;
      IF cardinality(v_queued) > 0 THEN
        UPDATE sandglass_jobs j SET state = 'queued' WHERE j.id = ANY (v_queued);
        PERFORM sandglass_count_classes(p_node, v_add, v_addw, true);
        PERFORM sandglass_wake_hungry(v_queued_kinds, p_lease_ms);
        promoted := cardinality(v_queued);
      END IF;
    END IF;
  END IF;
  SELECT floor(extract(epoch FROM (min(j.start_at) - clock_timestamp())) * 1000000)::bigint
    INTO next_start_us FROM sandglass_jobs j WHERE j.state = 'scheduled';
  RETURN NEXT;
END $$;

-- The claim rule. Takes the queue in claim order (class, then deadline) with SKIP LOCKED, so
-- claimers never wait for each other, and for each row: past its deadline -> ended
-- expired_in_queue (any kind: someone must); less time left than the kind's tail estimate ->
-- ended too_late_to_start; else claimed, with attempt + 1 (the fencing token) and the time it
-- has left by this clock. Rows of kinds this node does not serve are never locked (unless
-- expired). It locks no more rows than it claims or retires, so concurrent claimers skip only
-- what is really taken. It reads the queue per kind it serves and per class for expired rows
-- (candidates), locks the head among them by one statement and claims or retires it by a second
-- that names the ids. With p_limit 0 it only retires expired heads (the maintenance pass). A
-- claimer that does not hold its lease claims nothing; a hungry node's claim that would find
-- nothing returns at once; a short claim turns the node hungry and looks once more ("Hungry
-- nodes"). The last row, when rows were retired, has only `retired` set. A claimed row comes with
-- its retry spec (retry_max, retry_backoff_us; NULL: none): the claiming node retries it
-- within this claim; and waited_us, how long it waited in the queue by this clock (from its
-- creation, a delayed job's from its start), the claiming node's standing-queue detector's
-- input.
CREATE OR REPLACE FUNCTION sandglass_claim(p_owner text, p_node text, p_limit integer,
                                           p_kinds text[], p_tail_us bigint[])
RETURNS TABLE (job_id bigint, kind text, args text, priority smallint, attempt integer,
               remaining_us bigint, retired integer, retry_max integer, retry_backoff_us bigint,
               waited_us bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  r record; v_now timestamptz := clock_timestamp(); v_claimed integer := 0;
  v_retired integer := 0; v_seen integer; v_want integer;
  v_ids bigint[]; v_take boolean[]; v_left bigint[]; v_cands bigint[]; v_passed bigint[] := '{}';
  v_dec bigint[] := ARRAY[0, 0, 0, 0]; v_decw bigint[] := ARRAY[0, 0, 0, 0];
  v_ended bigint[] := '{}'; v_ended_kinds text[] := '{}';
  v_hungry boolean; v_looked_again boolean := false;
BEGIN
  -- A claimer whose lease may have lapsed claims nothing ("Nodes and leases").
  IF p_limit > 0 AND NOT sandglass_holds_lease(p_owner, v_now) THEN RETURN; END IF;
  -- A hungry node's claim that would find nothing ("Hungry nodes", idle claims).
  IF p_limit > 0 THEN
    SELECT h.hungry INTO v_hungry FROM sandglass_hunger h WHERE h.owner = p_owner;
    IF v_hungry AND sandglass_nothing_to_claim(p_kinds, v_now) THEN RETURN; END IF;
  END IF;
  LOOP  -- a second pass only after this node became hungry (below)
  LOOP
    v_want := CASE WHEN p_limit = 0 THEN 256 ELSE p_limit - v_claimed END;
    -- Candidates, read without locks: per served kind its first v_want queued rows in claim
    -- order (the index sandglass_jobs_claim), per class its first v_want expired rows (the
    -- index sandglass_jobs_queue). The first v_want rows of the claim order are among them, and
    -- no row of a kind this node does not serve is read unless it has expired. A limit of 0
    -- looks for expired rows only.
    SELECT coalesce(array_agg(c.id ORDER BY c.pr, c.dl), '{}') INTO v_cands
      FROM (SELECT DISTINCT u.id, u.pr, u.dl
              FROM (SELECT p.id, p.pr, p.dl
                      FROM unnest(CASE WHEN p_limit = 0 THEN '{}'::text[] ELSE p_kinds END) AS k(name)
                     CROSS JOIN LATERAL
                           (SELECT j.id, j.priority AS pr, j.deadline AS dl FROM sandglass_jobs j
                             WHERE j.state = 'queued' AND j.kind = k.name
                               AND NOT (j.id = ANY (v_passed))
                             ORDER BY j.priority, j.deadline LIMIT v_want) p
                    UNION ALL
                    SELECT e.id, e.pr, e.dl
                      FROM generate_series(0, 3) AS cl(n)
                     CROSS JOIN LATERAL
                           (SELECT j.id, j.priority AS pr, j.deadline AS dl FROM sandglass_jobs j
                             WHERE j.state = 'queued' AND j.priority = cl.n AND j.deadline <= v_now
                               AND NOT (j.id = ANY (v_passed))
                             ORDER BY j.deadline LIMIT v_want) e) u) c;
    -- The head: of the candidates, in claim order, the first v_want that no other claimer
    -- holds, locked (SKIP LOCKED: claimers never wait for each other). Ordered by the
    -- candidates' position, so that the rows are looked up by id and no index of the queue is
    -- walked.
    SELECT array_agg(h.id),
           array_agg(p_limit > 0 AND h.left_us > 0
                     AND h.left_us >= coalesce(p_tail_us[array_position(p_kinds, h.kind)], 0)),
           array_agg(h.left_us)
      INTO v_ids, v_take, v_left
      FROM (SELECT j.id, j.kind, floor(extract(epoch FROM (j.deadline - v_now)) * 1000000)::bigint AS left_us
              FROM unnest(v_cands) WITH ORDINALITY AS c(id, n)
              JOIN sandglass_jobs j ON j.id = c.id
             WHERE j.state = 'queued'
             ORDER BY c.n
             LIMIT v_want
               FOR UPDATE OF j SKIP LOCKED) h;
    v_seen := coalesce(cardinality(v_ids), 0);
    -- Fewer than wanted: every candidate was looked at, and those not taken (another claimer
    -- holds them, or they left the queue) are not read again by this call.
    IF v_seen < v_want AND cardinality(v_cands) > v_seen THEN
      v_passed := v_passed || ARRAY(SELECT x FROM unnest(v_cands) AS x
                                     WHERE NOT (x = ANY (coalesce(v_ids, '{}'))));
    END IF;
    EXIT WHEN cardinality(v_cands) = 0;
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
                d.left_us AS left_us, j.work_us AS w, d.take AS take, j.awaited AS aw,
                j.retry_max AS rm, j.retry_backoff_us AS rb,
                floor(extract(epoch FROM (v_now - greatest(j.created_at, coalesce(j.start_at, j.created_at))))
                      * 1000000)::bigint AS wt
    LOOP
      v_dec[r.cl + 1] := v_dec[r.cl + 1] + 1;
      v_decw[r.cl + 1] := v_decw[r.cl + 1] + r.w;
      IF r.take THEN
        v_claimed := v_claimed + 1;
        job_id := r.id; kind := r.k; args := r.a; priority := r.cl; attempt := r.at;
        remaining_us := r.left_us; retired := 0; retry_max := r.rm; retry_backoff_us := r.rb;
        waited_us := greatest(r.wt, 0);
        RETURN NEXT;
      ELSE
        v_retired := v_retired + 1;
        IF r.aw THEN
          v_ended := v_ended || r.id;
          v_ended_kinds := v_ended_kinds || r.k;
        END IF;
      END IF;
    END LOOP;
    -- Retired rows left room, or candidates were passed over: look again, unless the queue had
    -- no more (every candidate was taken, fewer than wanted).
    EXIT WHEN p_limit = 0 OR v_claimed >= p_limit OR (v_seen < v_want AND cardinality(v_cands) = v_seen);
  END LOOP;
    -- Hungry or not ("Hungry nodes"). A limit of 0 (expired heads only) says nothing.
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
    v_now := clock_timestamp();  -- after the wait: a deadline that passed meanwhile has passed
    UPDATE sandglass_hunger h SET hungry = true WHERE h.owner = p_owner;
    v_looked_again := true;
    v_passed := '{}';
  END LOOP;
  IF v_dec <> ARRAY[0, 0, 0, 0]::bigint[] THEN
    PERFORM sandglass_count_classes(p_node, ARRAY[-v_dec[1], -v_dec[2], -v_dec[3], -v_dec[4]],
                                    ARRAY[-v_decw[1], -v_decw[2], -v_decw[3], -v_decw[4]], false);
  END IF;
  IF cardinality(v_ended) > 0 THEN
    PERFORM sandglass_notify_outcomes(v_ended, v_ended_kinds, NULL);
  END IF;
  IF v_retired > 0 THEN
    job_id := NULL; kind := NULL; args := NULL; priority := NULL; attempt := NULL;
    remaining_us := NULL; retired := v_retired; retry_max := NULL; retry_backoff_us := NULL;
    waited_us := NULL;
    RETURN NEXT;
  END IF;
END $$;

-- Outcomes with fencing: written only while the job is still running under this owner and
-- attempt. The outcome says whether the job passed its commit point: the mark
-- (sandglass_record_commits) is written before commit() passes it, and a cancellation may still
-- win in between (the handler then throws Cancelled and never passes it); once the owner writes
-- the outcome, its word is the handler's. Announced: every outcome written when p_share, else
-- the awaited ones. Returns the ids written, each with whether it was announced; the others were
-- stale (taken back or ended). A job retried by its node has its attempts (p_attempt_logs[i],
-- the record's JSON array) and why its retries stopped (p_retry_stopped[i]); NULL: none.
CREATE OR REPLACE FUNCTION sandglass_finish(p_owner text, p_ids bigint[], p_attempts integer[],
                                 p_states text[], p_reasons text[], p_causes text[],
                                 p_committed boolean[], p_results text[], p_errors text[],
                                 p_run_us bigint[], p_share boolean,
                                 p_attempt_logs text[] DEFAULT NULL,
                                 p_retry_stopped text[] DEFAULT NULL)
RETURNS TABLE (id bigint, notified boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE v_ids bigint[]; v_told boolean[]; v_told_ids bigint[]; v_kinds text[]; v_run bigint[];
BEGIN
  WITH written AS (
    UPDATE sandglass_jobs j
       SET state = 'done', outcome_state = o.st, reason = o.re, cause = o.ca,
           committed = o.co, result = o.rs, error = o.er, run_us = o.ru,
           attempts = o.al, retry_stopped = o.rt, finished_at = clock_timestamp()
      FROM unnest(p_ids, p_attempts, p_states, p_reasons, p_causes, p_committed, p_results,
                  p_errors, p_run_us, p_attempt_logs, p_retry_stopped)
             AS o(id, at, st, re, ca, co, rs, er, ru, al, rt)
     WHERE j.id = ANY (p_ids) AND j.id = o.id AND j.attempt = o.at
       AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running'
    RETURNING j.id AS jid, j.kind AS jkind, o.ru AS ru, p_share OR j.awaited AS told)
  SELECT array_agg(w.jid), array_agg(w.told), array_agg(w.jid) FILTER (WHERE w.told),
         array_agg(w.jkind) FILTER (WHERE w.told), array_agg(w.ru) FILTER (WHERE w.told)
    INTO v_ids, v_told, v_told_ids, v_kinds, v_run FROM written w;
  IF v_ids IS NULL THEN RETURN; END IF;
  IF v_told_ids IS NOT NULL THEN PERFORM sandglass_notify_outcomes(v_told_ids, v_kinds, v_run, p_share); END IF;
  RETURN QUERY SELECT t.i, t.n FROM unnest(v_ids, v_told) AS t(i, n);
END $$;

-- The exchange: a node's ready outcomes (sandglass_finish) and its next claim of up to p_limit
-- jobs (sandglass_claim; none when p_limit is 0, which here does not retire expired heads) in
-- one statement and one commit: a finished job frees a worker, and the claim that fills it
-- carries the outcome. Rows with `written` set are the outcomes written (`notified`: announced);
-- the others are sandglass_claim's rows. p_attempt_logs, p_retry_stopped: sandglass_finish's.
CREATE OR REPLACE FUNCTION sandglass_finish_claim(p_owner text, p_node text, p_ids bigint[],
                                       p_attempts integer[], p_states text[], p_reasons text[],
                                       p_causes text[], p_committed boolean[], p_results text[],
                                       p_errors text[], p_run_us bigint[], p_limit integer,
                                       p_kinds text[], p_tail_us bigint[], p_share boolean,
                                       p_attempt_logs text[] DEFAULT NULL,
                                       p_retry_stopped text[] DEFAULT NULL)
RETURNS TABLE (written bigint, notified boolean, job_id bigint, kind text, args text,
               priority smallint, attempt integer, remaining_us bigint, retired integer,
               retry_max integer, retry_backoff_us bigint, waited_us bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF coalesce(cardinality(p_ids), 0) > 0 THEN
    RETURN QUERY
      SELECT f.id, f.notified, NULL::bigint, NULL::text, NULL::text, NULL::smallint,
             NULL::integer, NULL::bigint, NULL::integer, NULL::integer, NULL::bigint, NULL::bigint
        FROM sandglass_finish(p_owner, p_ids, p_attempts, p_states, p_reasons, p_causes,
                              p_committed, p_results, p_errors, p_run_us, p_share,
                              p_attempt_logs, p_retry_stopped) AS f;
  END IF;
  IF p_limit > 0 THEN
    RETURN QUERY
      SELECT NULL::bigint, NULL::boolean, c.job_id, c.kind, c.args, c.priority, c.attempt,
             c.remaining_us, c.retired, c.retry_max, c.retry_backoff_us, c.waited_us
        FROM sandglass_claim(p_owner, p_node, p_limit, p_kinds, p_tail_us) AS c;
  END IF;
END $$;

-- Commit points. JobContext::commit() asks the node first (daemon/cluster/commit_points.cpp),
-- which writes the mark here and lets the handler pass its commit point only once it is
-- written; so a row that says "not committed" means the handler has not passed it, and a lost
-- node's job is queued again only then. Marks the runs (p_ids[i], p_attempts[i]) of p_owner:
-- only the current owner's current attempt of a running job not asked to cancel (a
-- cancellation set under the row's lock came first). Returns the runs marked, (id, attempt), so
-- that an older run of the same job held by the same node is refused; the node cancels the
-- others. Marking twice is the same mark.
CREATE OR REPLACE FUNCTION sandglass_record_commits(p_owner text, p_ids bigint[], p_attempts integer[])
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

-- DELETE /v1/jobs/ID: a queued or scheduled job ends at once (cancelled_in_queue, cause caller;
-- a scheduled one is in no counter); a running one is marked and its owner told on its
-- incarnation's cancel channel ("Announced outcomes").
CREATE OR REPLACE FUNCTION sandglass_cancel(p_node text, p_id bigint)
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
  ELSIF r.state = 'scheduled' THEN
    PERFORM sandglass_end(p_id, r.kind, 'cancelled', 'cancelled_in_queue', 'caller');
    RETURN 'ended';
  ELSIF r.state = 'running' THEN
    UPDATE sandglass_jobs SET cancel_requested = true WHERE id = p_id;
    PERFORM pg_notify(sandglass_channel('cancel', r.owner), p_id::text || ' ' || r.owner);
    RETURN 'signalled';
  END IF;
  RETURN 'over';
END $$;

-- ---------------------------------------------------------------------------------------------
-- Taking back

-- Takes back one running row, which the caller has locked: queued again (the next claim makes
-- it attempt + 1) when it has not passed its commit point, was not asked to cancel, and has
-- more time left than its kind's tail estimate; otherwise it ends failed, node_lost, with
-- p_error (NULL: none). Counter rows are the caller's to order (ascending class). True when
-- queued again. The one rule of the sweep and of the take-back of lost claim answers.
CREATE OR REPLACE FUNCTION sandglass_take_back(p_node text, p_id bigint, p_kinds text[], p_tail_us bigint[],
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

-- The sweep, by p_owner. Nothing unless p_owner's own row is fresh and has beaten without a gap
-- for p_lease_ms since the server started ("Nodes and leases"). Then every node silent for
-- longer than its lease (and p_lease_ms) is judged lost, and the running jobs of lost owners
-- and of owners without a row are taken back (sandglass_take_back). One sweeper at a time; the
-- others skip. The sessions of the owners judged lost are ended (sandglass_session_name). Rows
-- of nodes silent for an hour are deleted, and the counters of names left without a node row
-- are folded into one row per class. Returns (requeued, lost) and those owners (lost_owners).
CREATE OR REPLACE FUNCTION sandglass_sweep(p_owner text, p_node text, p_lease_ms bigint, p_kinds text[],
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
     ORDER BY j.priority  -- counter rows in ascending class (this file's lock order)
       FOR UPDATE OF j SKIP LOCKED
  LOOP
    IF sandglass_take_back(p_node, r.id, p_kinds, p_tail_us, NULL) THEN
      requeued := requeued + 1;
    ELSE
      lost := lost + 1;
    END IF;
  END LOOP;
  DELETE FROM sandglass_nodes n WHERE n.heartbeat_at < v_now - interval '1 hour';
  -- The counters of names no node row has any more, folded into the row of the name '' per
  -- class, so that admission sums a few rows however many nodes came and went. The sums stay
  -- exact: each departed row is deleted under its lock with its values moved in the same
  -- transaction, and a late change under a departed name makes a new row, folded next time.
  -- Only the sweeper (this function's lock) writes the '' rows; in ascending class.
  WITH departed AS (
    DELETE FROM sandglass_counters c
     WHERE c.node <> '' AND NOT EXISTS (SELECT 1 FROM sandglass_nodes n WHERE n.node = c.node)
    RETURNING c.priority, c.queued, c.work_us)
  INSERT INTO sandglass_counters AS c (node, priority, queued, work_us)
  SELECT '', d.priority, sum(d.queued), sum(d.work_us) FROM departed d GROUP BY d.priority
   ORDER BY d.priority
  ON CONFLICT (node, priority, intake) DO UPDATE
    SET queued = c.queued + EXCLUDED.queued, work_us = c.work_us + EXCLUDED.work_us;
  RETURN NEXT;
END $$;

-- A claim (an exchange, or claims at insert) can commit while its answer never reaches the
-- node: the connection drops between the commit and the reply. Those rows stay running under a
-- live owner and no sweep would take them back. So a node that reconnects after a failed
-- claiming statement names the runs (p_held[i], p_held_attempts[i]) it still holds or has
-- outcomes of not yet written, and its other running rows are taken back by the sweep's rule.
-- Runs, not ids: a stale attempt held there must not hide the row's newer one.
-- A row another transaction holds is waited for and looked at again (READ COMMITTED re-reads a
-- row it waited for, so one no longer running under p_owner is left out), never skipped: a
-- skipped row would stay running under this live owner with no outcome. Who else can hold these
-- rows: a cancel (one row, a short transaction); a sweep, which takes rows with SKIP LOCKED and
-- so never waits for ours; no statement of p_owner itself (the caller runs none meanwhile and
-- has ended the server processes of its failed ones: lost_claims.cpp). So the wait is short and
-- no cycle of waits can form. Returns (requeued, lost).
CREATE OR REPLACE FUNCTION sandglass_take_back_unheld(p_owner text, p_node text, p_held bigint[],
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

-- ---------------------------------------------------------------------------------------------
-- Forgetting finished records

-- Deletes at most p_limit rows that are done: those finished before clock_timestamp() - p_keep_ms
-- (records.keep_ms, as a lone daemon keeps them) and, when p_max_count is given
-- (records.max_count), every done row older (by id: by submission) than the newest p_max_count
-- done rows, once it finished before clock_timestamp() - p_least_keep_ms (a waiter answered by
-- NOTIFY still reads its record). A queued or running row is never deleted. It walks the table
-- in id order from the oldest row and stops at the first row created after the keep_ms cut-off
-- that is not beyond the count (a later id was created later, up to the few ms between an id's
-- allocation and its insert: a row missed so goes with a later call), so a call reads the rows
-- it deletes and the old rows still live or recently finished, never the whole table, and needs
-- no index of its own (an index on finished_at would cost every outcome's write one more
-- insert). Finding the count's cut reads the newest p_max_count done rows backwards along the
-- primary key (and the live rows among them). One forgetter at a time: a call that finds
-- another under way returns 0 at once, rather than walk and wait for the same oldest rows as
-- the other (every node calls it).
CREATE OR REPLACE FUNCTION sandglass_forget(p_keep_ms bigint, p_limit integer,
                                            p_max_count bigint DEFAULT NULL,
                                            p_least_keep_ms bigint DEFAULT 0)
RETURNS integer LANGUAGE plpgsql SET enable_seqscan = off SET enable_sort = off AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_before timestamptz := v_now - p_keep_ms * interval '1 millisecond';
  v_least timestamptz := v_now - p_least_keep_ms * interval '1 millisecond';
  v_beyond bigint;  -- the newest done row beyond the count: it and older done rows may go
  v_ids bigint[] := '{}'; r record; v_deleted integer;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7170734562315111685) THEN RETURN 0; END IF;
  IF p_max_count IS NOT NULL THEN
    SELECT j.id INTO v_beyond FROM sandglass_jobs j WHERE j.state = 'done'
     ORDER BY j.id DESC OFFSET p_max_count LIMIT 1;
  END IF;
  FOR r IN SELECT j.id, j.state, j.created_at, j.finished_at FROM sandglass_jobs j ORDER BY j.id LOOP
    EXIT WHEN (r.created_at >= v_before AND (v_beyond IS NULL OR r.id > v_beyond))
           OR cardinality(v_ids) >= p_limit;
    IF r.state = 'done' AND (coalesce(r.finished_at, r.created_at) < v_before
                             OR (r.id <= v_beyond AND coalesce(r.finished_at, r.created_at) < v_least)) THEN
      v_ids := v_ids || r.id;
    END IF;
  END LOOP;
  IF cardinality(v_ids) = 0 THEN RETURN 0; END IF;
  DELETE FROM sandglass_jobs j
   WHERE j.id = ANY (v_ids) AND j.state = 'done'
     AND (coalesce(j.finished_at, j.created_at) < v_before
          OR (j.id <= v_beyond AND coalesce(j.finished_at, j.created_at) < v_least));
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;

-- ---------------------------------------------------------------------------------------------
-- The cluster view (daemon/cluster/cluster_view.hpp): what the listing and /v1/stats read
--
-- A running row is "claimed" while its node holds it unstarted (claimed ahead, in its local
-- queue) as the node last reported (sandglass_nodes.unstarted, 004_cluster_view.sql), else
-- "running"; every other state is the row's own ('done' rows show their outcome_state).

-- The node p_owner's unstarted runs now (its maintenance thread, once per heartbeat interval,
-- only when they changed). A lost row keeps what it had: it holds nothing any more.
CREATE OR REPLACE FUNCTION sandglass_note_unstarted(p_owner text, p_ids bigint[])
RETURNS void LANGUAGE sql AS $$
  UPDATE sandglass_nodes n SET unstarted = p_ids
   WHERE n.owner = p_owner AND NOT n.lost AND n.unstarted IS DISTINCT FROM p_ids;
$$;

-- The state the listing shows for a row of state p_state, id p_id and owner p_owner.
CREATE OR REPLACE FUNCTION sandglass_listed_state(p_state text, p_outcome_state text, p_id bigint,
                                                  p_owner text)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_state = 'done' THEN p_outcome_state
    WHEN p_state = 'running' AND EXISTS (SELECT 1 FROM sandglass_nodes n
                                          WHERE n.owner = p_owner AND p_id = ANY (n.unstarted))
      THEN 'claimed'
    ELSE p_state END;
$$;
