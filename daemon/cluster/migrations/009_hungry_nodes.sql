-- 009_hungry_nodes.sql: sandglass_queued is sent only when a live node may be waiting for it.
--
-- Why. Every transaction that calls pg_notify takes PostgreSQL's one NOTIFY lock of the whole
-- server at commit (PreCommit_Notify; bench/results/cluster-notify-lock.txt), and 008 still
-- sent sandglass_queued from every submission that queued a job: with three nodes, every
-- insert statement queued behind the others' commits, holding its node's counter rows all the
-- while, and woke every node's claimer. Yet a node that is claiming a full share has no use for
-- the wake-up: each of its jobs that ends is written by an exchange that also claims
-- (claimer.cpp), so it looks at the queue again anyway. Only a node whose last claim came back
-- short waits (for a NOTIFY, or its bounded poll).
--
-- The rule. sandglass_hunger.hungry says the node's last claim got fewer jobs than it asked
-- for. sandglass_claim sets it when a claim comes back short and clears it when one gets all it
-- asked for; a submission that queues a job sends sandglass_queued only when some live node
-- (heartbeat within the lease) is hungry (sandglass_wake_hungry). A node starts hungry (its
-- row is made with its node row, by a trigger), and a node without a row counts as hungry. The
-- flag has a table of its own so that a claim waiting on a lock never holds the node row its
-- heartbeat updates.
--
-- No lost wake-up. The race: a claim's snapshot misses a submission's rows (they commit
-- later), and the submission read hungry = false (the claim's update commits later). A
-- transaction-level advisory lock (key 7170734562315111683, used for nothing else) closes it:
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
-- after its waits for job rows (keyed inserts, sandglass_await) and before it locks any
-- counter row; the rows it locks after it (its new rows, its counters) are ones the claim
-- holding the lock cannot hold.
--
-- Idle claims. A hungry node claims every poll_ms, and a claim walks the queue in claim order
-- past every queued job of the kinds it does not serve: over 54,000 rows of another kind,
-- 42 ms of server CPU each time (measured on this machine's kind, loaded). A hungry node's
-- claim first asks sandglass_nothing_to_claim, a few index descents (0.2-0.3 ms there), and
-- returns at once when there is no queued job of its kinds and no expired head to retire. The
-- answer is as good as the walk's: a job it misses was not committed when it looked, and its
-- submission either saw the node hungry (it sends the NOTIFY) or came before the node turned
-- hungry (that claim's second pass saw it). A node that is not hungry claims as before (it
-- has a backlog; the walk finds its jobs at once). The index on kind costs one more entry per
-- queued insert.
--
-- Kept: the bounded poll (poll_ms) as a fallback; the unconditional NOTIFY of a job queued
-- again by the sweep or a take-back (005) and of 003 nodes' sandglass_submit_many (rare paths).
-- A node past its lease gets no NOTIFY (it has lost its jobs to the sweep; it polls).
-- Rolling upgrade: the signatures are 008's; a node of 008 still running claims through the
-- restated sandglass_claim, so it keeps its flag as a 009 node does.

CREATE TABLE sandglass_hunger (
  owner  text    PRIMARY KEY REFERENCES sandglass_nodes (owner) ON DELETE CASCADE,
  hungry boolean NOT NULL DEFAULT true
);
INSERT INTO sandglass_hunger (owner) SELECT owner FROM sandglass_nodes;

CREATE FUNCTION sandglass_hunger_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sandglass_hunger (owner) VALUES (NEW.owner) ON CONFLICT (owner) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER sandglass_hunger_row AFTER INSERT ON sandglass_nodes
  FOR EACH ROW EXECUTE FUNCTION sandglass_hunger_row();

CREATE INDEX sandglass_jobs_queued_kind ON sandglass_jobs (kind) WHERE state = 'queued';

-- Whether a claim of p_kinds at p_now would find nothing: no queued job of those kinds, and no
-- queued job past its deadline (to retire). Each test is a min() over an index column, one
-- descent per kind and per class; without enable_seqscan = off the generic plan of the kind
-- test is a scan of the table (with one kind queued, the planner expects a hit in the first
-- row it reads).
CREATE FUNCTION sandglass_nothing_to_claim(p_kinds text[], p_now timestamptz)
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

-- Sends sandglass_queued for each of p_kinds when a live node is hungry. The caller holds the
-- advisory lock 7170734562315111683 shared (this file's header).
CREATE FUNCTION sandglass_wake_hungry(p_kinds text[], p_lease_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(p_kinds), 0) = 0 THEN RETURN; END IF;
  IF EXISTS (SELECT 1 FROM sandglass_nodes n
              WHERE n.heartbeat_at > clock_timestamp() - p_lease_ms * interval '1 millisecond'
                AND NOT EXISTS (SELECT 1 FROM sandglass_hunger h WHERE h.owner = n.owner AND NOT h.hungry)) THEN
    PERFORM pg_notify('sandglass_queued', kn.name) FROM unnest(p_kinds) AS kn(name);
  END IF;
END $$;

-- 008's claim rule, unchanged, and the node's hunger: set when the claim comes back short (then
-- it looks once more), cleared when it gets all it asked for; a hungry node's claim that would
-- find nothing returns at once.
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
  -- A hungry node's claim that would find nothing (this file's header, "Idle claims").
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
    -- Hungry or not (this file's header). A limit of 0 (expired heads only) says nothing.
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

-- 008's sandglass_submit_claim; sandglass_queued only when a node is hungry.
CREATE OR REPLACE FUNCTION sandglass_submit_claim(p_node text, p_owner text, p_claim integer,
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
  -- Before any counter row is locked (this file's header: no deadlock with a claim that holds
  -- the lock exclusively and then counts its claims). Only a statement that may queue a job.
  IF cardinality(v_new) > 0 OR cardinality(v_kinds) > 0 THEN
    PERFORM pg_advisory_xact_lock_shared(7170734562315111683);
  END IF;

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
