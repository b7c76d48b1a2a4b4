-- A claim waits a bounded time for a lane's claim lock and skips the lane
-- when another session holds it longer (actor_worker_lane_wait): the claim
-- takes the wait as a new parameter, so its earlier form goes.
DROP FUNCTION IF EXISTS actor_worker_claim(text, text, integer, bigint, text[], text[]);
