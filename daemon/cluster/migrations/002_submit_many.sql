-- 002_submit_many.sql: many submissions in one statement (one round trip, one commit), each
-- admitted and inserted as sandglass_submit does, in order: each sees the ones before it.
CREATE FUNCTION sandglass_submit_many(p_node text, p_kinds text[], p_args text[],
                                      p_priorities smallint[], p_keys text[],
                                      p_fingerprints text[], p_remaining_us bigint[],
                                      p_budget_us bigint[], p_work_us bigint[],
                                      p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_kinds, 1), 0) LOOP
    RETURN QUERY
      SELECT i, s.job_id, s.verdict
        FROM sandglass_submit(p_node, p_kinds[i], p_args[i], p_priorities[i], p_keys[i],
                              p_fingerprints[i], p_remaining_us[i], p_budget_us[i],
                              p_work_us[i], p_tail_us[i], p_lease_ms) s;
  END LOOP;
END $$;
