-- 010_nodes: the live worker processes of the cluster, one row each.
--
-- A process inserts its row when it starts and refreshes it with every
-- heartbeat round (last_seen_at, the jobs it holds); a graceful stop
-- deletes it. A process not seen for the reclaim window is dead (shown so
-- by `actor-worker nodes`); maintenance deletes rows not seen for ten
-- windows. `leader` is kept for the cluster's leader election (not built
-- yet: always false).
CREATE TABLE worker_nodes (
  worker_id    text        PRIMARY KEY,
  node         text        NOT NULL,
  host         text        NOT NULL,
  pid          integer     NOT NULL,
  version      text        NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  queues       text[]      NOT NULL DEFAULT '{}',
  running      integer     NOT NULL DEFAULT 0,
  leader       boolean     NOT NULL DEFAULT false
) WITH (fillfactor = 70);
