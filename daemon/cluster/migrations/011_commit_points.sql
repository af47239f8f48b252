-- 011_commit_points.sql: a commit point counts only once the job's row says so.
--
-- Before, a node looked at its running jobs' JobContext::committed() every 5 ms and wrote the
-- ones that had passed their commit point with its heartbeat (006's sandglass_heartbeat). A
-- node killed within those milliseconds left a row that said "not committed" for a job whose
-- handler had gone on past commit(): the sweep queued it again, and it could run twice.
--
-- Now JobContext::commit() asks the node first (daemon/cluster/commit_points.cpp): the node
-- writes the mark with this function and lets the handler pass its commit point only when the
-- mark is written. So a row that says "not committed" means the handler has not passed it, and
-- a lost node's job is queued again only then (sandglass_sweep, sandglass_take_back: unchanged).
--
-- Fencing as for outcomes: only the current owner's current attempt of a running job is
-- marked. A job asked to cancel (cancel_requested, set by sandglass_cancel under the row's lock)
-- is not: the cancellation came first, as a local one that wins the race with commit() does.
-- Returns the ids marked; a node cancels the others locally (they are not its to commit).
CREATE FUNCTION sandglass_record_commits(p_owner text, p_ids bigint[], p_attempts integer[])
RETURNS SETOF bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  RETURN QUERY
    UPDATE sandglass_jobs j SET committed = true
      FROM unnest(p_ids, p_attempts) AS c(id, at)
     WHERE j.id = ANY (p_ids) AND j.id = c.id AND j.attempt = c.at
       AND j.owner IS NOT DISTINCT FROM p_owner AND j.state IS NOT DISTINCT FROM 'running'
       AND NOT j.cancel_requested
    RETURNING j.id;
END $$;

-- 008's sandglass_finish, but the outcome says whether the job passed its commit point: the
-- mark above is written before commit() passes it, and a cancellation may still win in between
-- (the handler then throws Cancelled and never passes it). The mark matters only while the row
-- is running (the sweep's rule); once the owner writes the outcome, its word is the handler's.
CREATE OR REPLACE FUNCTION sandglass_finish(p_owner text, p_ids bigint[], p_attempts integer[],
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
           committed = o.co, result = o.rs, error = o.er, run_us = o.ru,
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
