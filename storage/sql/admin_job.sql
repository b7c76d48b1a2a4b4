-- One job as JSON, as the `jobs` view shows it (`actor-worker job show`).
SELECT row_to_json(j)::text AS job FROM jobs AS j WHERE j.id = $1
