-- The first statement of a transactional handler's transaction
-- (job_store::transact): no statement of it, and no pause between its
-- statements, may last longer than $1 (milliseconds as text, such as
-- '30000'), which is shorter than what is left of the job's lease and of
-- its deadline. Past it the server ends the transaction, so a handler that
-- hangs can never hold its job's row or its connection for longer.
SELECT set_config('statement_timeout', $1, true),
       set_config('idle_in_transaction_session_timeout', $1, true)
