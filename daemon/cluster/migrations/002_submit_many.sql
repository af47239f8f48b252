-- 002_submit_many.sql: many submissions in one statement (one round trip, one commit), each
-- admitted and inserted as sandglass_submit does; each sees the ones before it. They go in
-- class order (then as given), so that the transaction takes the node's counter rows in
-- ascending class, as every other transaction that holds several of them does: no deadlock
-- between two batches, or a batch and a claim or a sweep.
CREATE FUNCTION sandglass_submit_many(p_node text, p_kinds text[], p_args text[],
                                      p_priorities smallint[], p_keys text[],
                                      p_fingerprints text[], p_remaining_us bigint[],
                                      p_budget_us bigint[], p_work_us bigint[],
                                      p_tail_us bigint[], p_lease_ms bigint)
RETURNS TABLE (ord integer, job_id bigint, verdict text) LANGUAGE plpgsql AS $$
DECLARE i integer;
BEGIN
  FOR i IN
    SELECT o.n FROM unnest(p_priorities) WITH ORDINALITY AS o(p, n) ORDER BY o.p, o.n
  LOOP
    RETURN QUERY
      SELECT i, s.job_id, s.verdict
        FROM sandglass_submit(p_node, p_kinds[i], p_args[i], p_priorities[i], p_keys[i],
                              p_fingerprints[i], p_remaining_us[i], p_budget_us[i],
                              p_work_us[i], p_tail_us[i], p_lease_ms) s;
  END LOOP;
END $$;
