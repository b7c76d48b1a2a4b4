-- One job as JSON, as jobs_live shows it (`actor-worker jobs show`).
SELECT row_to_json(j)::text AS job FROM jobs_live AS j WHERE j.id = $1
