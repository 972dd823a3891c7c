-- Expiry commits an order's cancellation first and gives its unit back to
-- Redis after (issue 26): a failure in between leaves an expired order
-- whose unit is not yet back, never a pending order whose unit is sold
-- again. given_back_at records the give-back, so a later pass finishes
-- the ones a failure interrupted (the give-back is idempotent per sale).
ALTER TABLE orders ADD COLUMN given_back_at timestamptz NULL;
-- Before this, a unit went back before its order was marked expired.
UPDATE orders SET given_back_at = expired_at WHERE status = 'expired';
CREATE INDEX orders_to_give_back ON orders (id)
    WHERE status = 'expired' AND given_back_at IS NULL;
