-- The columns of the tables $1 in the current schema (the schema check).
SELECT table_name, column_name FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = ANY ($1::text[])
