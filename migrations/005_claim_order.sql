-- The claim reads its priorities, and whether jobs wait off the lanes at
-- each, from actor_worker_claim_order, which replaces this function.
DROP FUNCTION IF EXISTS actor_worker_priorities(text);
