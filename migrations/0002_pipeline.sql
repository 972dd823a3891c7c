-- The order pipeline (issue 15): each order carries the sale it came from.
--   epoch:   the SKU's ledger epoch (a reset starts a new one); every check
--            below is per epoch, so a SKU reset and sold again starts clean
--   sale:    the sale's number in its epoch (the ledger's `sold` after it):
--            a redelivered message of the same sale inserts nothing
--   unit:    the unit sold; a unit whose reservation expired goes back to
--            the stock and may be sold again, so one unit may have several
--            orders, but only one that is not expired
-- The database still refuses a duplicate order whatever happens above it:
-- one order per sale, one live order per unit, one order per request id.
ALTER TABLE orders
    ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
    ADD COLUMN sale bigint NOT NULL DEFAULT 0,
    ADD COLUMN instance text NOT NULL DEFAULT '',
    ADD COLUMN sold_at timestamptz NULL,
    ADD COLUMN paid_at timestamptz NULL,
    ADD COLUMN expired_at timestamptz NULL,
    DROP CONSTRAINT orders_sku_unit_key,
    DROP CONSTRAINT orders_request_id_key,
    ADD CONSTRAINT orders_sale_key UNIQUE (sku, epoch, sale),
    ADD CONSTRAINT orders_request_id_key UNIQUE (sku, epoch, request_id);
CREATE UNIQUE INDEX orders_live_unit_key ON orders (sku, epoch, unit)
    WHERE status <> 'expired';
-- The expiry pass: reservations past their deadline.
CREATE INDEX orders_pending_pay_by ON orders (pay_by) WHERE status = 'pending_payment';
