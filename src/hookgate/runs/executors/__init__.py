"""Where runs advance: in this process (a SQLite file) or as jobs of the run queue
(PostgreSQL). Both implement RunExecutor; the server above knows nothing more."""
