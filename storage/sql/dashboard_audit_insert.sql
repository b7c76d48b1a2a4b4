-- One audit log row of a dashboard action, in the action's transaction:
-- action $1, target $2 (JSON), affected $3, job ids $4, outcome $5, remote
-- address $6, user agent $7, worker $8.
INSERT INTO audit_log (action, target, affected, job_ids, outcome,
                       remote_addr, user_agent, worker)
VALUES ($1, $2::jsonb, $3, $4::bigint[], $5, $6, $7, $8)
RETURNING id
