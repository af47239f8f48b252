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
