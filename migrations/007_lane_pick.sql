-- The claim reads a lane's jobs through actor_worker_lane_pick, which
-- replaces this function: it no longer carries the picked jobs' columns
-- through arrays (the claim reads them again), so its result changed.
DROP FUNCTION IF EXISTS actor_worker_lane_take(text, integer, pg_snapshot, pg_snapshot,
  xid8, bigint, integer, integer, bigint, boolean, text[], boolean);
-- actor_worker_lane_jobs reads only the ring slots it is given.
DROP FUNCTION IF EXISTS actor_worker_lane_jobs(text, integer, pg_snapshot, pg_snapshot,
  xid8, bigint, integer);
