-- Named leases: which process currently holds a singleton job (e.g. proxy health checks).
-- A holder renews its lease; when it stops renewing (it died), another process takes over
-- once expires_at has passed. Times are epoch milliseconds.
CREATE TABLE leases (
  name       TEXT    PRIMARY KEY,
  owner      TEXT    NOT NULL,
  expires_at INTEGER NOT NULL
);
