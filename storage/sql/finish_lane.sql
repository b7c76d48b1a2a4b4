-- Lane outcomes: completions become one receipt per batch, other outcomes
-- turn their job into an ordinary running row recorded below.
SELECT actor_worker_finish_lane($1, $2::bigint[], $3::bigint[], $4::boolean[], $5,
                                $6) AS batch_id
