-- The runtime's SQL functions present in the current schema.
SELECT proname, pronargs FROM pg_proc
 WHERE pronamespace = current_schema()::regnamespace
   AND proname LIKE 'actor\_worker\_%'
