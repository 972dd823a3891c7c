-- The stock of the SKUs whose stock the database itself protects (the
-- pg-* variants), and the ledger of their sales. A sale's row is written
-- by the statement or transaction that moves the stock, so one cannot
-- change without the other. Nothing here refuses an oversell: a unit
-- sold twice (a lost update) must show in the ledger, not be hidden by a
-- constraint the variant under test did not earn.
CREATE TABLE stock (
    sku text PRIMARY KEY,
    -- Which stocking of the SKU this is: a reset starts the next one.
    epoch bigint NOT NULL,
    initial bigint NOT NULL CHECK (initial >= 0),
    remaining bigint NOT NULL,
    -- Sales of this epoch: each sale's number is the count after it.
    sold bigint NOT NULL DEFAULT 0,
    -- pg-optimistic's compare-and-set: every write of the row adds one.
    version bigint NOT NULL DEFAULT 0
);

-- Every sale. `unit` is the stock value the sale read, as in Redis's
-- ledger: two rows with one unit are an oversell.
CREATE TABLE stock_sales (
    sku text NOT NULL,
    epoch bigint NOT NULL,
    sale bigint NOT NULL,
    unit bigint NOT NULL,
    request_id text NULL,
    instance text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (sku, epoch, sale)
);
CREATE INDEX stock_sales_unit ON stock_sales (sku, epoch, unit);

-- Each request id's first answer, for its retries: written in the
-- transaction that decided it, so a retry finds the answer if and only
-- if it was committed; two attempts with one id cannot both commit.
CREATE TABLE stock_requests (
    sku text NOT NULL,
    epoch bigint NOT NULL,
    request_id text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('sold', 'sold_out')),
    unit bigint NULL,
    remaining bigint NOT NULL,
    PRIMARY KEY (sku, epoch, request_id)
);
