-- What to do about lane partitions now, in order ('finalize', 'drop',
-- 'detach'); $1: the retention of completed jobs in seconds
-- (migrations/019).
SELECT gen, name, action FROM actor_worker_lane_partition_chores($1)
