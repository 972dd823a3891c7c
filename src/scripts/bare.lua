-- The bench's bare baseline (`serve --bench-bare`, GET /bench/bare): one
-- decrement and one count, nothing else. Its keys are its own
-- (bench_bare:{sku}, bench_bare_count:{sku}), never a real SKU's stock or
-- ledger, so a bench run cannot change what a SKU holds or sold.
-- KEYS[1] the counter, KEYS[2] the hash of counts. Returns the counter.
local left = redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], 'calls', 1)
return left
