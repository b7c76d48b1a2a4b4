-- Which of the leases $1 worker $2 holds are still its own: a rescue took
-- the others back.
SELECT b.id FROM job_batches AS b
 WHERE b.id = ANY ($1::bigint[]) AND b.worker = $2 AND b.rescued_at IS NULL
