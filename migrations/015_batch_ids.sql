-- 015_batch_ids: claim batch ids a database crash cannot hand out twice.
--
-- A claim commits asynchronously (storage/sql/claim.sql), so a server crash
-- can lose it, and with it the WAL of the id sequence's advance: after
-- recovery the sequence may hand the lost claim's id out again. The worker
-- that held the lost claim still runs its jobs under that id, and an
-- outcome names its batch by (id, worker): were the same worker to get the
-- same id for its next claim, the old runs' outcomes would count against
-- the new batch and close it early. So the id's low 20 bits are random: a
-- reused sequence value yields the same id once in 2^20, and ids stay
-- unique (a primary key) and far below 2^53 for billions of claims.
ALTER TABLE claim_batches ALTER COLUMN id DROP IDENTITY;
CREATE SEQUENCE claim_batch_numbers AS bigint;
-- New ids land above every existing one.
SELECT setval('claim_batch_numbers',
              (coalesce(max(id), 0) >> 20) + 1, false)
  FROM claim_batches;
ALTER TABLE claim_batches ALTER COLUMN id
  SET DEFAULT (nextval('claim_batch_numbers') << 20)
              | floor(random() * 1048576)::bigint;
ALTER SEQUENCE claim_batch_numbers OWNED BY claim_batches.id;
