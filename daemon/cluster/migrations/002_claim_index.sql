-- 002_claim_index.sql: the claim reads the queue per served kind (sandglass_claim's candidates,
-- sandglass_submit_claim's head), each in claim order: an index that leads with the kind.
-- It also answers whether any job of a kind is queued (sandglass_nothing_to_claim), which the
-- index on the kind alone did.
DROP INDEX sandglass_jobs_queued_kind;
CREATE INDEX sandglass_jobs_claim ON sandglass_jobs (kind, priority, deadline) WHERE state = 'queued';
