-- The orders a sale becomes. The database refuses a duplicate order even
-- if everything above it misbehaves: one order per unit of a SKU, one per
-- request id (orders without a request id are not limited by it).
CREATE TABLE orders (
    id bigserial PRIMARY KEY,
    sku text NOT NULL,
    unit bigint NOT NULL,
    request_id text NULL,
    status text NOT NULL DEFAULT 'pending_payment'
        CHECK (status IN ('pending_payment', 'paid', 'expired')),
    created_at timestamptz NOT NULL DEFAULT now(),
    pay_by timestamptz NULL,
    CONSTRAINT orders_sku_unit_key UNIQUE (sku, unit),
    CONSTRAINT orders_request_id_key UNIQUE (request_id)
);
