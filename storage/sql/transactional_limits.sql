-- The first statement of a transactional group's transaction
-- (job_store::transact_group): no statement of it, and no pause between
-- its statements, may last longer than $1 (milliseconds as text, such as
-- '30000'), which is shorter than what is left of every run's lease and
-- deadline; and no lock may be waited for longer than $2 (milliseconds as
-- text; '0' = as long as the statement may last). Past the first the
-- server ends the transaction, so a handler that hangs can never hold its
-- jobs' rows or its connection for longer; past the second only the
-- waiting statement fails, and its run goes on alone (a group waits for
-- no other transaction's locks, so two groups never hold each other up).
-- Handlers read the worker their runs belong to (the jobs' locked_by, $3)
-- as current_setting('actor_worker.worker').
SELECT set_config('statement_timeout', $1, true),
       set_config('idle_in_transaction_session_timeout', $1, true),
       set_config('lock_timeout', $2, true),
       set_config('actor_worker.worker', $3, true)
