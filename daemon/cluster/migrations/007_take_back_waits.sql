-- 007_take_back_waits.sql: the take-back of claims whose answer was lost waits for a row that
-- another transaction holds instead of passing over it.
--
-- 005's sandglass_take_back_unheld locked this owner's unheld running rows with SKIP LOCKED. A
-- row held at that moment by someone else (a DELETE's sandglass_cancel, which locks the row
-- while it marks it) was passed over, and nothing would look at it again: it stayed running
-- under this live owner, which does not run it, with no outcome. Now the take-back waits for
-- such a row and then looks at it again (READ COMMITTED re-reads a row it waited for, so one
-- that is no longer running under p_owner is left out). Who else can hold these rows: a cancel
-- (one row, no counter rows, a short transaction); another node's sweep, which takes rows with
-- SKIP LOCKED and so never waits for ours; and no statement of p_owner itself, since the
-- caller runs none meanwhile and has ended the processes of its failed ones
-- (daemon/cluster/lost_claims.cpp). So the wait is short and no cycle of waits can form.
--
-- Same signature and meaning as 005; 005 and 006 nodes in a rolling upgrade call it as before.

CREATE OR REPLACE FUNCTION sandglass_take_back_unheld(p_owner text, p_node text, p_held bigint[],
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
