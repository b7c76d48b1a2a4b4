-- 012_leader: one elected leader per database (the cluster), by a lease row.
--
-- Every worker process is a candidate: with each heartbeat round it takes
-- the row if it is free or its lease has expired, and renews it if it is
-- its own. The holder is the leader and alone runs the cluster's
-- maintenance (rescues, retention cleanup, vacuum cadence, queue samples,
-- periodic jobs). A graceful stop deletes the row and NOTIFYs the
-- candidates, so one takes over at once; a killed leader's lease expires
-- (reclaim_window - heartbeat_interval after its last renewal) and the
-- next candidate round takes over, within the reclaim window.
-- No home-made consensus: the row's primary key and INSERT ... ON CONFLICT
-- decide, on PostgreSQL's clock alone.
CREATE TABLE cluster_leader (
  -- One row at most.
  singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
  worker_id  text        NOT NULL,
  node       text        NOT NULL,
  -- When this holder took the row (kept while it renews).
  elected_at timestamptz NOT NULL DEFAULT now(),
  renewed_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);

COMMENT ON COLUMN worker_nodes.leader IS
  'whether this process held the cluster_leader lease at its last round';
