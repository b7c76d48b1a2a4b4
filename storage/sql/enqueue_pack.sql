-- One pack of lane jobs (migrations/020_job_packs.sql): queue $1, priority
-- $2, $3 jobs with kinds $4 and args $5 (arrays in job order). Its jobs'
-- ids are first_id, first_id + 1, ... The table's checks test every job
-- as job_rows tests a row; its trigger sends the queue's NOTIFY.
INSERT INTO job_packs (first_id, queue, priority, n, kinds, args)
VALUES (nextval('job_pack_blocks'), $1, $2, $3, $4::text[], $5::jsonb[])
RETURNING first_id
