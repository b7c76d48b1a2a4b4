-- One job as JSON, as jobs shows it (`actor-worker jobs show`).
SELECT row_to_json(j)::text AS job FROM jobs AS j WHERE j.id = $1
