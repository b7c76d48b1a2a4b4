-- A lane batch says whether it took its tick's last job, so that the
-- lane's next claim starts a new tick without reading the used-up one
-- (actor_worker_lane_head replaces actor_worker_lane_position, whose
-- result had no room for it).
ALTER TABLE job_batches ADD COLUMN tick_done boolean NOT NULL DEFAULT false;
DROP FUNCTION IF EXISTS actor_worker_lane_position(text, integer);
