-- A graceful stop: this process's row goes.
DELETE FROM worker_nodes WHERE worker_id = $1
