-- A graceful stop of the leader: the lease goes at once, and the NOTIFY on
-- channel $2 tells the other candidates to take it now rather than at
-- their next round. Nothing happens when the lease is not this process's.
WITH resigned AS (
  DELETE FROM cluster_leader WHERE worker_id = $1 RETURNING worker_id
), node AS (
  UPDATE worker_nodes SET leader = false
   WHERE worker_id IN (SELECT worker_id FROM resigned)
)
SELECT pg_notify($2, worker_id) FROM resigned
