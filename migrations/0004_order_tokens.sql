-- An order belongs to its buyer (issue 27): its sale's answer carried a
-- random token, and paying or finding the order takes it. Orders written
-- before this have none: nobody can pay them through the API (they expire).
ALTER TABLE orders ADD COLUMN token text NULL;
