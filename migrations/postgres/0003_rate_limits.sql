-- Rate-limit counts shared by every instance: requests (or failed authentications) per
-- policy, subject (a token id, a client address) and fixed window. Each process adds what
-- it counted every 250 ms, in one statement, and reads the totals back; windows that have
-- ended are deleted. UNLOGGED: these counts are worth neither a WAL write nor an fsync. A
-- crash of the database empties the table, which only starts the current windows afresh.
CREATE UNLOGGED TABLE rate_limits (
  policy       text   NOT NULL,
  subject      text   NOT NULL,
  window_start bigint NOT NULL,
  window_end   bigint NOT NULL,
  count        bigint NOT NULL,
  PRIMARY KEY (policy, subject, window_start)
);
