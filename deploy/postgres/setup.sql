-- The database and role of a Switchboard broker pair (deploy/postgres/README.md).
-- Run once, on the primary, as a superuser:
--   sudo -u postgres psql -v ON_ERROR_STOP=1 -f deploy/postgres/setup.sql
-- then give the role its password with psql's \password (the guide shows how): never in this
-- file, on a command line or in an ALTER ROLE ... PASSWORD statement that the server may log.
--
-- The brokers create their tables themselves at their first start (CREATE TABLE IF NOT EXISTS,
-- under an advisory lock, so two brokers starting at once do not race). They need nothing but
-- their own database and a schema of their own, named after the role: PostgreSQL's default
-- search_path ("$user", public) then puts their tables there, on any version.

-- A role that can log in and do nothing else: not a superuser, cannot create databases or
-- roles, cannot replicate, and gets no password here.
CREATE ROLE switchboard LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOINHERIT;

-- UTF8 from template0, whatever the cluster's default; the tables compare text byte by byte
-- (COLLATE "C") on their own, so the locale does not matter to them.
CREATE DATABASE switchboard OWNER switchboard ENCODING 'UTF8' TEMPLATE template0;
REVOKE ALL ON DATABASE switchboard FROM PUBLIC;

-- synchronous_commit on for the role's sessions, whatever the server's default: a COMMIT
-- returns only once the WAL is flushed on the primary and, with synchronous_standby_names set,
-- on the synchronous replica. The journal's sessions set it themselves; this also covers the
-- lease's. (The journal's sessions also set idle_in_transaction_session_timeout to lease.ttl,
-- protocol/README.md section 7.2: nothing to set here for that.)
ALTER ROLE switchboard IN DATABASE switchboard SET synchronous_commit = on;

\connect switchboard
-- The brokers' schema; the public schema is closed to everyone.
CREATE SCHEMA switchboard AUTHORIZATION switchboard;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
